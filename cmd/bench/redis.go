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
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// errRefused is a refusal to touch the user's data: exit 1, nothing done.
var errRefused = errors.New("refused")

// target is the one Redis database, or the one Redis Cluster, the bench
// owns.
type target struct {
	rdb   redis.UniversalClient // what both systems use; every command is counted
	raw   redis.UniversalClient // the bench's own reads, pauses and flushes; not counted
	count *rtCounter
	db    int
	// cluster is raw as a cluster client in cluster mode; nil on one server.
	cluster *redis.ClusterClient
	masters int      // 1 on one server
	queues  []string // the Asynq queues both systems use
	// flushAllowed is -flush: empty a target that holds keys.
	flushAllowed bool
}

// openTarget connects to REDIS_URL's server, database o.db, or to the
// cluster o.clusterAddrs names, and checks that the bench may empty it: it
// must hold no keys unless -flush was given.
func openTarget(ctx context.Context, o options, out io.Writer) (*target, error) {
	if len(o.clusterAddrs) > 0 {
		return openCluster(ctx, o, out)
	}
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
	t := &target{rdb: redis.NewClient(opt), raw: redis.NewClient(&rawOpt), count: newRTCounter(), db: o.db,
		queues: queueNames(o.queues), flushAllowed: o.flush, masters: 1}
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
	return t, t.checkEmpty(out, size, fmt.Sprintf("database %d of %s", o.db, opt.Addr), fmt.Sprintf("FLUSHDB database %d", o.db))
}

// checkEmpty refuses a target holding size keys unless -flush was given.
func (t *target) checkEmpty(out io.Writer, size int64, what, flush string) error {
	switch {
	case size > 0 && !t.flushAllowed:
		t.close()
		return fmt.Errorf("%w: %s holds %d keys and the bench empties it; "+
			"pass -flush to let it %s, or choose an empty one", errRefused, what, size, flush)
	case size > 0:
		fmt.Fprintf(out, "plan:   %s holds %d keys; -flush given: %s now, before each measurement and at the end\n", what, size, flush)
	default:
		fmt.Fprintf(out, "plan:   %s is empty; %s before each measurement and at the end\n", what, flush)
	}
	return nil
}

func (t *target) flush(ctx context.Context) error {
	if t.cluster != nil {
		if err := t.cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			return c.FlushDB(ctx).Err()
		}); err != nil {
			return fmt.Errorf("flushdb on every master: %w", err)
		}
		return nil
	}
	if err := t.raw.FlushDB(ctx).Err(); err != nil {
		return fmt.Errorf("flushdb %d: %w", t.db, err)
	}
	return nil
}

func (t *target) close() {
	_ = t.rdb.Close()
	_ = t.raw.Close()
}

// queue is the Asynq queue both systems use when -queues is 1, and the
// queue of the scripts section.
const queue = "default"

// Asynq's keys for a queue (internal/base in asynq v0.26), read to tell
// when a drain has ended. Every key of a queue carries the queue's name as
// its hash tag: in a cluster a queue lives in one slot, on one master.
func asynqKeys(q string) (pending, active, scheduled, retry string) {
	p := "asynq:{" + q + "}:"
	return p + "pending", p + "active", p + "scheduled", p + "retry"
}

// queueEmpty reports whether no task is pending, running or waiting in any
// of the bench's queues.
func (t *target) queueEmpty(ctx context.Context) (bool, error) {
	pipe := t.raw.Pipeline()
	var lens []*redis.IntCmd
	for _, q := range t.queues {
		pending, active, scheduled, retry := asynqKeys(q)
		lens = append(lens, pipe.LLen(ctx, pending), pipe.LLen(ctx, active),
			pipe.ZCard(ctx, scheduled), pipe.ZCard(ctx, retry))
	}
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

// serverStats reads Redis's counters; in a cluster, the sum over every
// master (their CPU added up, as if one server had done all the work).
func (t *target) serverStats(ctx context.Context) (serverStats, error) {
	s := serverStats{cmds: map[string]cmdStat{}}
	if t.cluster == nil {
		info, err := t.raw.Info(ctx, "cpu", "commandstats").Result()
		if err != nil {
			return serverStats{}, fmt.Errorf("info: %w", err)
		}
		s.add(info)
		return s, nil
	}
	var mu sync.Mutex
	err := t.cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "cpu", "commandstats").Result()
		if err != nil {
			return fmt.Errorf("info on %s: %w", c.Options().Addr, err)
		}
		mu.Lock()
		defer mu.Unlock()
		s.add(info)
		return nil
	})
	return s, err
}

// add adds one server's INFO cpu and commandstats to s.
func (s *serverStats) add(info string) {
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
			name := strings.TrimPrefix(k, "cmdstat_")
			sum := s.cmds[name]
			s.cmds[name] = cmdStat{calls: sum.calls + c.calls, usec: sum.usec + c.usec}
		}
	}
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
