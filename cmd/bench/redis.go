package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// errRefused is a refusal to touch the user's data: exit 1, nothing done.
var errRefused = errors.New("refused")

// target is the one Redis database the bench owns.
type target struct {
	rdb   *redis.Client // what both systems use; every command is counted
	raw   *redis.Client // the bench's own reads, pauses and flushes; not counted
	count *rtCounter
	db    int
}

// openTarget connects to REDIS_URL's server, database o.db, and checks that
// the bench may empty it: it must hold no keys unless -flush was given.
func openTarget(ctx context.Context, o options, out io.Writer) (*target, error) {
	safe := "the REDIS_URL"
	if u, err := url.Parse(o.redisURL); err == nil {
		safe = u.Redacted()
	}
	opt, err := redis.ParseURL(o.redisURL)
	if err != nil {
		return nil, fmt.Errorf("redis url %s: %s", safe, strings.ReplaceAll(err.Error(), o.redisURL, safe))
	}
	urlDB := opt.DB
	opt.DB = o.db
	opt.Protocol = o.resp
	// Both systems share the pool; it must not be what limits them.
	opt.PoolSize = max(opt.PoolSize, 32, 2*o.concurrency)
	rawOpt := *opt
	rawOpt.PoolSize = 4
	rawOpt.ReadTimeout = time.Minute // FLUSHDB of a million finished nodes
	t := &target{rdb: redis.NewClient(opt), raw: redis.NewClient(&rawOpt), count: newRTCounter(), db: o.db}
	t.rdb.AddHook(t.count)
	if o.rtt > 0 {
		t.rdb.AddHook(latency(o.rtt))
	}

	size, err := t.raw.DBSize(ctx).Result()
	if err != nil {
		t.close()
		return nil, fmt.Errorf("redis %s: %w", opt.Addr, err)
	}
	fmt.Fprintf(out, "redis:  %s, database %d (-db; the URL's database %d is not used), pool %d, RESP%d\n",
		opt.Addr, o.db, urlDB, opt.PoolSize, opt.Protocol)
	switch {
	case size > 0 && !o.flush:
		t.close()
		return nil, fmt.Errorf("%w: database %d of %s holds %d keys and the bench empties its database; "+
			"pass -flush to let it FLUSHDB database %d, or choose an empty one with -db", errRefused, o.db, opt.Addr, size, o.db)
	case size > 0:
		fmt.Fprintf(out, "plan:   database %d holds %d keys; -flush given: FLUSHDB it now, before each measurement and at the end\n", o.db, size)
	default:
		fmt.Fprintf(out, "plan:   database %d is empty; FLUSHDB it before each measurement and at the end\n", o.db)
	}
	return t, nil
}

func (t *target) flush(ctx context.Context) error {
	if err := t.raw.FlushDB(ctx).Err(); err != nil {
		return fmt.Errorf("flushdb %d: %w", t.db, err)
	}
	return nil
}

func (t *target) close() {
	_ = t.rdb.Close()
	_ = t.raw.Close()
}

// queue is the Asynq queue both systems use.
const queue = "default"

// Asynq's keys for queue (internal/base in asynq v0.26), read to tell when
// a drain has ended and to pause delivery while tasks are enqueued.
var (
	pendingKey   = "asynq:{" + queue + "}:pending"
	activeKey    = "asynq:{" + queue + "}:active"
	scheduledKey = "asynq:{" + queue + "}:scheduled"
	retryKey     = "asynq:{" + queue + "}:retry"
)

// queueEmpty reports whether no task is pending, running or waiting.
func (t *target) queueEmpty(ctx context.Context) (bool, error) {
	pipe := t.raw.Pipeline()
	lens := []*redis.IntCmd{pipe.LLen(ctx, pendingKey), pipe.LLen(ctx, activeKey),
		pipe.ZCard(ctx, scheduledKey), pipe.ZCard(ctx, retryKey)}
	if _, err := pipe.Exec(ctx); err != nil {
		return false, fmt.Errorf("queue length: %w", err)
	}
	for _, l := range lens {
		if l.Val() != 0 {
			return false, nil
		}
	}
	return true, nil
}

// serverStats are Redis's own counters: CPU seconds and commands executed,
// including those called from scripts. They are server-wide: on a Redis
// that others use too they count their work as well.
type serverStats struct {
	cpu   time.Duration
	calls int64
	cmds  map[string]cmdStat // by command, from commandstats
}

// cmdStat is one command's line of INFO commandstats.
type cmdStat struct {
	calls int64
	usec  int64 // time spent executing it; a script's includes its calls
}

func (t *target) serverStats(ctx context.Context) (serverStats, error) {
	info, err := t.raw.Info(ctx, "cpu", "commandstats").Result()
	if err != nil {
		return serverStats{}, fmt.Errorf("info: %w", err)
	}
	s := serverStats{cmds: map[string]cmdStat{}}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		switch {
		case k == "used_cpu_sys" || k == "used_cpu_user":
			f, _ := strconv.ParseFloat(v, 64)
			s.cpu += time.Duration(f * float64(time.Second))
		case strings.HasPrefix(k, "cmdstat_"):
			// calls=12,usec=34,usec_per_call=2.83,...
			var c cmdStat
			for _, f := range strings.Split(v, ",") {
				name, val, _ := strings.Cut(f, "=")
				switch name {
				case "calls":
					c.calls, _ = strconv.ParseInt(val, 10, 64)
				case "usec":
					c.usec, _ = strconv.ParseInt(val, 10, 64)
				}
			}
			s.calls += c.calls
			s.cmds[strings.TrimPrefix(k, "cmdstat_")] = c
		}
	}
	return s, nil
}

// since is what Redis did between earlier and s.
func (s serverStats) since(earlier serverStats) serverStats {
	d := serverStats{cpu: s.cpu - earlier.cpu, calls: s.calls - earlier.calls, cmds: map[string]cmdStat{}}
	for k, c := range s.cmds {
		e := earlier.cmds[k]
		if c.calls != e.calls {
			d.cmds[k] = cmdStat{calls: c.calls - e.calls, usec: c.usec - e.usec}
		}
	}
	return d
}
