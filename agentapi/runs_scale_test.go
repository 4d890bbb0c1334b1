package agentapi_test

import (
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/agentapi"
)

// runsIDMillis is the Redis time (ms) an entry was appended at: its id's first
// part.
func runsIDMillis(id string) int64 {
	ms, _, _ := strings.Cut(id, "-")
	n, _ := strconv.ParseInt(ms, 10, 64)
	return n
}

// One handler serves 1,000 concurrent stream clients (100 on each of 10
// runs): every client gets every event once, in order, through one shared
// reader per run. It logs how long an event takes from its append to the
// clients (Redis's clock and this machine's are the same clock here): the
// target is 50 ms p99, measured 23 ms on the shared 2-core machine at load
// 13 without -race (78 ms in a noisier run; 2.7 s under -race beside the
// rest of the suite).
func TestThousandStreamClients(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 clients: not in -short")
	}
	e := runsSetup(t, agentapi.StreamLimits{})
	const runs, perRun, ticks = 10, 100, 40
	type target struct{ tid, rid string }
	targets := make([]target, runs)
	for i := range targets {
		tid := runsThread(t)
		targets[i] = target{tid, e.createBackground(t, tid,
			`{"assistant_id": "slow", "input": {"ticks": 0}, "stream_mode": "custom", "if_not_exists": "create"}`)}
		_, _, _ = e.call(t, "GET", "/threads/"+tid+"/runs/"+targets[i].rid+"/join", "")
	}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	goroutines := runtime.NumGoroutine()

	// The clients join each run's stream before it starts (a queued run:
	// the thread's first ended run keeps it free, so enqueue one behind a
	// slow one).
	for i, tg := range targets {
		targets[i].rid = e.createBackground(t, tg.tid, fmt.Sprintf(
			`{"assistant_id": "slow", "input": {"ticks": %d, "every": 0.05}, "stream_mode": "custom", "after_seconds": 1}`, ticks))
	}
	streams := make([]*runsSSEStream, 0, runs*perRun)
	for _, tg := range targets {
		for range perRun {
			s := e.openStream(t, t.Context(), "GET", "/threads/"+tg.tid+"/runs/"+tg.rid+"/stream", "")
			require.Equal(t, http.StatusOK, s.resp.StatusCode)
			streams = append(streams, s)
		}
	}
	var idle runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&idle)
	t.Logf("1,000 idle streams: %d goroutines more, %.1f KiB of Go heap and stacks each (server and test client together)",
		runtime.NumGoroutine()-goroutines,
		float64(idle.HeapInuse+idle.StackInuse-before.HeapInuse-before.StackInuse)/1024/float64(len(streams)))
	assert.LessOrEqual(t, e.api.StreamRuns(), runs, "one reader per run")

	var mu sync.Mutex
	var lags []int64
	got := make([][]runsSSE, len(streams))
	var wg sync.WaitGroup
	for i, s := range streams {
		wg.Go(func() {
			for {
				ev, ok := s.next()
				if !ok {
					return
				}
				now := time.Now().UnixMilli()
				got[i] = append(got[i], ev)
				if ev.id != "" {
					mu.Lock()
					lags = append(lags, now-runsIDMillis(ev.id))
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for i, g := range got {
		tg := targets[i/perRun]
		stored, err := e.client.ReadStream(t.Context(), tg.rid, "", 0)
		require.NoError(t, err)
		require.Len(t, g, len(stored), "client %d", i)
		for j := range stored {
			require.Equal(t, stored[j].ID, g[j].id, "client %d, event %d", i, j)
		}
	}
	slices.Sort(lags)
	p50, p99 := lags[len(lags)/2], lags[len(lags)*99/100]
	// Reported, not asserted: a timing is a measurement (the race
	// detector and a loaded machine stretch it), not an outcome. Quiet and
	// without -race: p99 23 ms (docs/agent-server.md).
	t.Logf("delivery to 1,000 clients: %d events, p50 %d ms, p99 %d ms, max %d ms", len(lags), p50, p99, lags[len(lags)-1])
}
