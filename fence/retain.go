package fence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// RetainFinished applies a time to live to the keys (run, nodes, events,
// locator) of up to limit runs per shard that ended, taking them off the
// finished index; ttl below zero keeps them forever. It returns how many
// runs it retained; RetainBatch says besides whether more are waiting.
func (s *Store) RetainFinished(ctx context.Context, ttl time.Duration, limit int64) (int, error) {
	r, err := s.RetainBatch(ctx, ttl, limit)
	return r.Runs, err
}

// Retained is what one RetainBatch call did.
type Retained struct {
	Runs   int  // runs this call retained
	Behind bool // a shard held more ended runs than the call took: call again at once
}

// retainSpread is how many batches of a shard's finished index a call
// reads: it retains one of them, picked at random, so that runners
// retaining at the same time mostly take different runs.
const retainSpread = 4

// RetainBatch applies a time to live to the keys (run, nodes, events,
// locator) of up to limit runs per shard that ended, as RetainFinished.
// Each event stream is stored again at its real size as it gets its TTL: a
// short run's stream would otherwise keep Redis's 4 KiB preallocation. The
// scripts that end a run add it to its shard's index (all but a one-node
// run that SUCCEEDED, which its commit retains when the store has a
// RunRetention, leaving only a thread's run's bare id for its locator),
// so this costs three round trips per batch (per Redis node), never one
// on a node's path: the index, the runs' node lists, and
// one retain.lua per run; two more when runs of threads were retained, for
// their locators. A run stays readable for ttl; a late write from a stale
// owner then finds no node and changes nothing.
//
// Where a shard holds more than limit ended runs, the call takes one of
// the first retainSpread batches of limit at random, not always the
// oldest: callers on several runners then rarely run the same run's
// script (the loser's changes nothing, but costs Redis as much), and
// Behind tells them to call again at once.
//
// Safe to call again after any error: a run whose script ran but whose
// reply was lost is out of the finished index, and its locator, if in
// another slot, is there as the bare run id for the next call to expire.
func (s *Store) RetainBatch(ctx context.Context, ttl time.Duration, limit int64) (Retained, error) {
	var out Retained
	pipe := s.rdb.Pipeline()
	due := make([]*redis.StringSliceCmd, Shards)
	for i := range due {
		due[i] = pipe.ZRange(ctx, s.keys.Finished(i), 0, limit*retainSpread-1)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return out, fmt.Errorf("retain: %w", err)
	}
	var pending []locatorDue // bare run ids: retained runs' locators, left by a call that did not finish
	type finished struct {
		NodeRef
		shard  int
		member string
	}
	var runs []finished
	var hashes []*redis.MapStringStringCmd
	var streams []*redis.Cmd
	pipe = s.rdb.Pipeline()
	for shard, c := range due {
		members := c.Val()
		if int64(len(members)) > limit {
			out.Behind = true
			batches := (int64(len(members)) + limit - 1) / limit
			from := rand.Int64N(batches) * limit
			members = members[from:min(from+limit, int64(len(members)))]
		}
		for _, m := range members {
			thread, run, _, ok := ParseRef(m)
			if !ok {
				if ValidateID("run", m) == nil {
					pending = append(pending, locatorDue{shard, m})
				}
				continue
			}
			runs = append(runs, finished{NodeRef{Thread: thread, Run: run}, shard, m})
			hashes = append(hashes, pipe.HGetAll(ctx, s.keys.Run(thread, run)))
			streams = append(streams, pipe.Do(ctx, "XRANGE", s.keys.Events(thread, run), "-", "+"))
		}
	}
	if len(runs) == 0 {
		return out, s.expireLocators(ctx, pending, ttl)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return out, fmt.Errorf("retain: %w", err)
	}
	ids := make([][]string, len(runs))
	nodes := make([][]*redis.MapStringStringCmd, len(runs))
	pack := make([]bool, len(runs)) // packed by retain.lua: read its node hashes
	pipe = s.rdb.Pipeline()
	for i, r := range runs {
		_ = json.Unmarshal([]byte(hashes[i].Val()["nodes"]), &ids[i]) // a run gone already has no node keys to expire
		if st := hashes[i].Val()["status"]; ttl != 0 && (st == "SUCCEEDED" || st == "FAILED") {
			pack[i] = true
			for _, id := range ids[i] {
				nodes[i] = append(nodes[i], pipe.HGetAll(ctx, s.keys.Node(r.Thread, r.Run, id)))
			}
		}
	}
	if pipe.Len() > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return out, fmt.Errorf("retain: %w", err)
		}
	}
	cmds := s.runEach(ctx, "retain", len(runs), func(i int) ([]string, []any) {
		r := runs[i]
		keys := []string{s.keys.Finished(r.shard), s.keys.Run(r.Thread, r.Run), s.keys.Events(r.Thread, r.Run),
			s.keys.Packed(r.Thread, r.Run)}
		for _, id := range ids[i] {
			keys = append(keys, s.keys.Node(r.Thread, r.Run, id))
		}
		elsewhere := ""
		switch {
		case r.Thread == r.Run:
			keys = append(keys, s.keys.Locator(r.Run)) // in this slot
		case ttl >= 0:
			elsewhere = r.Run
		}
		chunks := s.streamKeys(r.Thread, r.Run) // the run's chunk stream (stream.go): its time to live
		keys = append(keys, chunks...)
		var packed []byte
		var seen string
		if pack[i] {
			packed, seen = packRead(hashes[i].Val(), nodes[i], streams[i])
		}
		return keys, []any{retentionMs(ttl), r.member, elsewhere, len(ids[i]), packed, seen, len(chunks)}
	})
	// The locator of a thread's run lives in the run id's slot: it gets its
	// time to live once the script has retained the run (code 1), never
	// for a run a retry re-opened meanwhile (code 0).
	for i, c := range cmds {
		code, err := c.Int64()
		if err != nil {
			return out, fmt.Errorf("retain: %w", err)
		}
		if code != 1 {
			continue
		}
		out.Runs++
		if r := runs[i]; r.Thread != r.Run && ttl >= 0 {
			pending = append(pending, locatorDue{r.shard, r.Run})
		}
	}
	return out, s.expireLocators(ctx, pending, ttl)
}

// packRead packs a finished run from what RetainBatch read of it, and
// says what retain.lua must still find for the packing to stand (the
// stream's last entry id, then how many fields the run hash and each node
// hash hold: "id|n|n1,n2"). When a reply cannot be read it returns ""
// for both, and the script packs the run as it finds it.
func packRead(run map[string]string, nodeCmds []*redis.MapStringStringCmd, stream *redis.Cmd) ([]byte, string) {
	raw, err := stream.Slice()
	if err != nil {
		return nil, ""
	}
	events := make([]streamEntry, 0, len(raw))
	for _, r := range raw {
		e, ok := r.([]any)
		if !ok || len(e) != 2 {
			return nil, ""
		}
		id, ok1 := e[0].(string)
		fields, ok2 := e[1].([]any)
		if !ok1 || !ok2 {
			return nil, ""
		}
		flat := make([]string, len(fields))
		for j, f := range fields {
			if flat[j], ok = f.(string); !ok {
				return nil, ""
			}
		}
		events = append(events, streamEntry{ID: id, Flat: flat})
	}
	nodes := make([]map[string]string, len(nodeCmds))
	var seen strings.Builder
	if len(events) > 0 {
		seen.WriteString(events[len(events)-1].ID)
	}
	fmt.Fprintf(&seen, "|%d|", len(run))
	for j, c := range nodeCmds {
		if c.Err() != nil {
			return nil, ""
		}
		nodes[j] = c.Val()
		if j > 0 {
			seen.WriteByte(',')
		}
		seen.WriteString(strconv.Itoa(len(nodes[j])))
	}
	packed, ok := packRun(run, nodes, events)
	if !ok {
		return nil, ""
	}
	return packed, seen.String()
}

// locatorDue is a bare run id in a shard's finished index.
type locatorDue struct {
	shard int
	run   string
}

// locatorRetryAfter is how far back in its finished index a run id goes
// when its locator could not be reached.
const locatorRetryAfter = time.Minute

// expireLocators gives each locator its time to live, then takes its run
// id off the finished index: in that order, so that an error between the
// two leaves the id for the next call. An id whose locator could not be
// reached (its master down) stays, moved locatorRetryAfter into the
// future: the index is read from its oldest end, so ids that keep failing
// must not hold back the runs that ended after them.
//
// A retry may re-open a run between its retention and this call (the
// call's caller read the id, then paused). Retry persists the locator
// once its script has re-opened the run, so the expiry and that persist
// land in one of two orders: persist last, and the locator keeps no time
// to live; expiry last, and the status read after it finds the run live
// again and persists the locator here.
func (s *Store) expireLocators(ctx context.Context, due []locatorDue, ttl time.Duration) error {
	if len(due) == 0 {
		return nil
	}
	done, later := due, []locatorDue(nil)
	var failed error
	if ttl >= 0 { // else runs are kept forever now: their locators too
		pipe := s.rdb.Pipeline()
		cmds := make([]*redis.BoolCmd, len(due))
		threads := make([]*redis.StringCmd, len(due))
		for i, d := range due {
			cmds[i] = pipe.PExpire(ctx, s.keys.Locator(d.run), time.Duration(retentionMs(ttl))*time.Millisecond)
			threads[i] = pipe.Get(ctx, s.keys.Locator(d.run))
		}
		_, _ = pipe.Exec(ctx)
		done = nil
		var expired []locatorRead
		for i, c := range cmds {
			if err := c.Err(); err != nil {
				failed = err
				later = append(later, due[i])
				continue
			}
			done = append(done, due[i])
			if c.Val() {
				expired = append(expired, locatorRead{due[i].run, threads[i]})
			}
		}
		if err := s.keepReopened(ctx, expired); err != nil {
			return fmt.Errorf("retain: locators: %w", err) // every id stays for the next call
		}
	}
	if len(done)+len(later) > 0 {
		pipe := s.rdb.Pipeline()
		for _, d := range done {
			pipe.ZRem(ctx, s.keys.Finished(d.shard), d.run)
		}
		retryAt := float64(time.Now().Add(locatorRetryAfter).UnixMilli())
		for _, d := range later { // XX: not back in if a retry took it out meanwhile
			pipe.ZAddXX(ctx, s.keys.Finished(d.shard), redis.Z{Score: retryAt, Member: d.run})
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("retain: locators: %w", err)
		}
	}
	if failed != nil {
		return fmt.Errorf("retain: locators: %w", failed)
	}
	return nil
}

// locatorRead is a run id and its locator's value, the run's thread.
type locatorRead struct {
	run    string
	thread *redis.StringCmd
}

// keepReopened takes the time to live off the locators just given one
// whose run is live again (a retry re-opened it; expireLocators).
func (s *Store) keepReopened(ctx context.Context, expired []locatorRead) error {
	if len(expired) == 0 {
		return nil
	}
	pipe := s.rdb.Pipeline()
	status := make([]*redis.StringCmd, len(expired))
	for i, l := range expired {
		if thread := l.thread.Val(); thread != "" {
			status[i] = pipe.HGet(ctx, s.keys.Run(thread, l.run), "status")
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	pipe = s.rdb.Pipeline()
	for i, l := range expired {
		if st := status[i]; st != nil && (st.Val() == "RUNNING" || st.Val() == "QUEUED") {
			pipe.Persist(ctx, s.keys.Locator(l.run))
		}
	}
	if pipe.Len() == 0 {
		return nil
	}
	_, err := pipe.Exec(ctx)
	return err
}

// retentionMs is ttl as retain.lua's ARGV[1]: milliseconds, at least 1
// for a positive ttl; 0 deletes now; -1 keeps forever.
func retentionMs(ttl time.Duration) int64 {
	switch {
	case ttl < 0:
		return -1
	case ttl == 0:
		return 0
	}
	return max(1, ms(ttl))
}

func anySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// TrimRuns drops listing entries of runs created before cutoff. Pick a
// cutoff older than any run still running: a trimmed run stays readable by
// id, it only leaves the listing.
func (s *Store) TrimRuns(ctx context.Context, cutoff time.Time) (int64, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, Shards)
	for i := range cmds {
		cmds[i] = pipe.ZRemRangeByScore(ctx, s.keys.Runs(i), "-inf", fmt.Sprintf("(%d", cutoff.UnixMilli()))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("trim runs: %w", err)
	}
	var n int64
	for _, c := range cmds {
		n += c.Val()
	}
	return n, nil
}
