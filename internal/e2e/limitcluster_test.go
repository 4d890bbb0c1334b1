package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/runner"
)

// leaseSpan is one attempt of a node, from its claim to its end: its
// commit, or, for an attempt whose owner died, the end of its lease (the
// lease_until its takeover's heartbeat_lost event names).
type leaseSpan struct{ from, to time.Time }

// mostAtOnce replays the runs' event histories (each run's stream in
// order, the runs merged by time) and returns the most attempts running
// at once, an attempt running from its claimed or takeover event to its
// end: its commit, failure, release or park, or the end of its lease
// when it was taken over. On a Redis Cluster a dead owner's slot comes
// back when its lease and the holder's margin have run out, which may be
// before a takeover: a taken-over attempt is not running past its lease.
// plain is the same count with a taken-over attempt running until its
// takeover (maxRunning's rule).
func mostAtOnce(t *testing.T, byRun map[string][]fence.Event) (most, plain int) {
	t.Helper()
	type mark struct {
		at    time.Time
		delta int
	}
	var marks, plainMarks []mark
	for _, evs := range byRun {
		open := map[string]time.Time{}
		for _, e := range evs {
			switch e.Type {
			case "claimed", "takeover":
				open[e.Node] = e.At
			case "heartbeat_lost":
				from, ok := open[e.Node]
				require.True(t, ok, "heartbeat_lost of %s with no attempt open", e.Node)
				ms, err := strconv.ParseInt(e.Details["lease_until"], 10, 64)
				require.NoError(t, err, "lease_until %q", e.Details["lease_until"])
				marks = append(marks, mark{from, 1}, mark{time.UnixMilli(ms), -1})
				plainMarks = append(plainMarks, mark{from, 1}, mark{e.At, -1})
				delete(open, e.Node)
			case "committed", "failed", "released", "cancelled", "parked":
				if from, ok := open[e.Node]; ok {
					marks = append(marks, mark{from, 1}, mark{e.At, -1})
					plainMarks = append(plainMarks, mark{from, 1}, mark{e.At, -1})
					delete(open, e.Node)
				}
			}
		}
		require.Empty(t, open, "every attempt ended")
	}
	peak := func(ms []mark) int {
		// Ends before starts at the same instant: a slot freed and taken
		// within one millisecond was not held twice.
		sort.Slice(ms, func(i, j int) bool {
			if ms[i].at.Equal(ms[j].at) {
				return ms[i].delta < ms[j].delta
			}
			return ms[i].at.Before(ms[j].at)
		})
		n, top := 0, 0
		for _, m := range ms {
			n += m.delta
			top = max(top, n)
		}
		return top
	}
	return peak(marks), peak(plainMarks)
}

// TestLimitConcurrencyOnClusterWithRunnerKilled: the must-hold of limits
// on a Redis Cluster. 3 runners on a 3-master cluster, 160 one-node runs
// spread over every shard, each node naming key k limited to 3; a runner
// holding a slot is killed (SIGKILL) mid-run. Every node succeeds; from
// the event history never more than 3 run at once (a killed owner's
// attempt counted until its lease ran out); and at the end no slot is
// held: none leaked, none used twice.
func TestLimitConcurrencyOnClusterWithRunnerKilled(t *testing.T) {
	t.Parallel()
	c := newRedisCluster(t, redistest.ClusterOptions{Masters: 3})
	_, errOut, code := c.enqueue("", "limit", "set", "k", "--concurrency", "3")
	require.Equal(t, 0, code, errOut)
	dir := t.TempDir()
	var histories []string
	runners := map[string]*runnerProc{}
	for i := range 3 {
		id := fmt.Sprintf("r%d", i)
		histories = append(histories, filepath.Join(dir, id+".jsonl"))
		runners[id] = c.startRunner(id, clusterEnv(histories[i]))
	}

	threads := spreadThreads("lim", 10)
	specs := make([]*runner.RunSpec, len(threads))
	for i, th := range threads {
		specs[i] = &runner.RunSpec{}
		require.NoError(t, json.Unmarshal([]byte(fmt.Sprintf(
			`{"id":%q,"nodes":[{"id":"n","kind":"sleep","input":{"duration":"50ms"},"limits":["k"]}]}`, th)), specs[i]))
	}
	begin := time.Now()
	c.submitAll(specs)

	// Kill, mid-run, a runner that holds a slot now.
	store := fence.New(c.rdb, nil)
	ctx := t.Context()
	victim := ""
	waitUntil(t, 30*time.Second, "a third of the runs to end and a runner to hold a slot", func() bool {
		sums, err := store.Summaries(ctx, threads)
		if err != nil {
			return false
		}
		done := 0
		var running []string
		for _, s := range sums {
			switch s.Status {
			case "SUCCEEDED":
				done++
			case "RUNNING":
				running = append(running, s.ID)
			}
		}
		if done < len(threads)/3 {
			return false
		}
		for _, id := range running {
			info, err := store.GetRun(ctx, id)
			if err == nil && info.Nodes[0].State == "RUNNING" && runners[info.Nodes[0].Owner] != nil {
				victim = info.Nodes[0].Owner
				return true
			}
		}
		return false
	})
	runners[victim].signal(t, syscall.SIGKILL)
	t.Logf("killed %s mid-run after %v", victim, time.Since(begin).Round(time.Millisecond))

	ended := c.waitEnded(threads, 50*time.Second)
	requireSucceeded(t, ended)
	took := time.Since(begin)

	byRun := map[string][]fence.Event{}
	takeovers := 0
	for _, th := range threads {
		evs, err := store.Events(ctx, th, "", 0)
		require.NoError(t, err)
		byRun[th] = evs
		for _, e := range evs {
			if e.Type == "takeover" && e.Details["prev_owner"] == victim {
				takeovers++
			}
		}
	}
	if took > 15*time.Second { // a delivery lost with the killed runner: say whose
		last, at := "", time.Time{}
		for th, evs := range byRun {
			if e := evs[len(evs)-1]; e.At.After(at) {
				last, at = th, e.At
			}
		}
		for _, e := range byRun[last] {
			t.Logf("slowest run %s: %s %s epoch %d by %s %v", last, e.At.Format("15:04:05.000"), e.Type, e.Epoch, e.Worker, e.Details)
		}
	}
	most, plain := mostAtOnce(t, byRun)
	require.LessOrEqual(t, most, 3, "never more than 3 running at once")
	require.Equal(t, 3, most, "the limit was used to the full")
	require.Positive(t, takeovers, "the killed runner's attempt was taken over")

	// No slot leaked: all free, at the latest once a take that died with
	// the runner (between its take and its claim) has run out.
	waitUntil(t, 5*time.Second, "every slot of k free", func() bool {
		inUse, waiting := c.limitUse("k", "k")
		return inUse == 0 && waiting == 0
	})

	var lat []time.Duration
	for _, op := range readHistory(t, histories...) {
		if op.Op == "claim" && op.Outcome == "ok" {
			lat = append(lat, time.Duration(op.Return-op.Call))
		}
	}
	slices.Sort(lat)
	require.NotEmpty(t, lat)
	t.Logf("%d one-node runs on k (limit 3) succeeded in %v with %s killed: at most %d at once by lease "+
		"(%d counting a dead owner's attempt until its takeover), %d takeovers; claim with a limit p50 %v, p99 %v (%d claims)",
		len(threads), took.Round(time.Millisecond), victim, most, plain, takeovers,
		lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)*99/100].Round(time.Microsecond), len(lat))
}
