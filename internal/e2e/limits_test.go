package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// maxRunning replays a run's event history (one stream, in order) and
// returns the most nodes running at once: a claim or continuation starts
// a node, a takeover moves it, an end stops it.
func maxRunning(evs []event) int {
	running := map[string]bool{}
	most := 0
	for _, e := range evs {
		switch e.Type {
		case "claimed", "takeover":
			running[e.Node] = true
		case "committed", "failed", "released", "cancelled", "parked":
			delete(running, e.Node)
		}
		most = max(most, len(running))
	}
	return most
}

// limitUse reads `enqueue limit list --json` for one key.
func (c *cluster) limitUse(name, key string) (inUse, waiting int) {
	c.t.Helper()
	out, errOut, code := c.enqueue("", "limit", "list", "--json")
	require.Equal(c.t, 0, code, errOut)
	var ls []struct {
		Name string `json:"name"`
		Keys []struct {
			Key     string `json:"key"`
			InUse   int    `json:"in_use"`
			Waiting int    `json:"waiting"`
		} `json:"keys"`
	}
	require.NoError(c.t, json.Unmarshal([]byte(out), &ls), out)
	for _, l := range ls {
		for _, k := range l.Keys {
			if l.Name == name && k.Key == key {
				return k.InUse, k.Waiting
			}
		}
	}
	c.t.Fatalf("limit %s key %s not listed: %s", name, key, out)
	return 0, 0
}

// 3 runners, 200 nodes on key k limited to 3: never more than 3 running
// at once, by the event history; every node succeeds; no slot left held.
func TestLimitConcurrencyAcrossRunners(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	_, errOut, code := c.enqueue("", "limit", "set", "k", "--concurrency", "3")
	require.Equal(t, 0, code, errOut)
	for i := range 3 {
		c.startRunner(fmt.Sprintf("r%d", i), map[string]string{"CONCURRENCY": "8"})
	}
	nodes := make([]string, 200)
	for i := range nodes {
		nodes[i] = fmt.Sprintf(`{"id":"n%d","kind":"sleep","input":{"duration":"10ms"},"limits":["k"]}`, i)
	}
	run := c.submit(`{"id":"limited","nodes":[` + strings.Join(nodes, ",") + `]}`)
	require.Equal(t, 0, c.watch(run))
	st := c.status(run)
	require.Equal(t, "SUCCEEDED", st.Status)
	evs := c.events(run)
	committed := 0
	for _, e := range evs {
		if e.Type == "committed" {
			committed++
		}
	}
	require.Equal(t, 200, committed)
	most := maxRunning(evs)
	require.LessOrEqual(t, most, 3, "never more than 3 running at once")
	require.Equal(t, 3, most, "the limit was used to the full")
	inUse, waiting := c.limitUse("k", "k")
	require.Zero(t, inUse, "no slot leaked")
	require.Zero(t, waiting)
}

// A slot holder paused past its lease: the takeover gets the slot; after
// SIGCONT the stale owner's release frees nothing, so still never more
// than the limit runs at once, and no slot is left held.
func TestLimitSlotOfPausedHolderPassesToTakeover(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	_, errOut, code := c.enqueue("", "limit", "set", "one", "--concurrency", "1")
	require.Equal(t, 0, code, errOut)
	dir := t.TempDir()
	held := filepath.Join(dir, "held")
	step := sh(fmt.Sprintf(`if [ "$RUNNER" = r0 ] && mkdir %q 2>/dev/null; then sleep 300; fi; echo 1`, held))
	victim := c.startRunner("r0", map[string]string{"RUNNER": "r0", "EXEC_ENV": "RUNNER"})
	nodes := make([]string, 6)
	for i := range nodes {
		nodes[i] = fmt.Sprintf(`{"id":"n%d","kind":"exec","input":%s,"limits":["one"]}`, i, step)
	}
	run := c.submit(`{"id":"paused","nodes":[` + strings.Join(nodes, ",") + `]}`)
	waitUntil(t, 20*time.Second, "r0 to hold the slot", func() bool {
		_, err := os.Stat(held)
		return err == nil
	})
	victim.signal(t, syscall.SIGSTOP)
	c.startRunner("r1", nil)
	c.startRunner("r2", nil)
	require.Equal(t, 0, c.watch(run))
	victim.signal(t, syscall.SIGCONT)
	waitUntil(t, 20*time.Second, "the stale owner to give up its attempt", func() bool {
		return strings.Contains(victim.log.String(), "attempt_abandoned")
	})
	// Its late release (refused) must not have freed the slot of anyone:
	// a second run under the same limit still runs one at a time.
	run2 := c.submit(`{"id":"after","nodes":[` + strings.ReplaceAll(strings.Join(nodes, ","), `"n`, `"m`) + `]}`)
	require.Equal(t, 0, c.watch(run2))

	evs := c.events(run)
	var takeover bool
	for _, e := range evs {
		if e.Type == "takeover" {
			takeover = true
			require.Equal(t, "r0", e.Details["prev_owner"])
		}
		if e.Type == "committed" {
			require.NotEqual(t, "r0", e.Worker, "the paused owner committed nothing")
		}
	}
	require.True(t, takeover)
	require.Equal(t, 1, maxRunning(evs))
	require.Equal(t, 1, maxRunning(c.events(run2)))
	inUse, waiting := c.limitUse("one", "one")
	require.Zero(t, inUse, "no slot leaked")
	require.Zero(t, waiting)
}

// A rate of 20/s with burst 5 over about 10 s of load: at most 25 claims
// in any one-second window, by the claims' times in the history; every
// node succeeds, none failed.
func TestLimitRateAcrossRunners(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	_, errOut, code := c.enqueue("", "limit", "set", "api", "--rate", "20/s", "--burst", "5")
	require.Equal(t, 0, code, errOut)
	for i := range 3 {
		c.startRunner(fmt.Sprintf("r%d", i), nil)
	}
	nodes := make([]string, 200)
	for i := range nodes {
		nodes[i] = fmt.Sprintf(`{"id":"n%d","kind":"noop","limits":["api"]}`, i)
	}
	begin := time.Now()
	run := c.submit(`{"id":"rated","nodes":[` + strings.Join(nodes, ",") + `]}`)
	require.Equal(t, 0, c.watch(run))
	require.Greater(t, time.Since(begin), 8*time.Second, "200 claims at 20/s take about 9 s")
	out, errOut, code := c.enqueue("", "events", run, "--json")
	require.Equal(t, 0, code, errOut)
	var claims []time.Time
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e struct {
			Type string    `json:"type"`
			At   time.Time `json:"at"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &e))
		require.NotEqual(t, "failed", e.Type)
		if e.Type == "claimed" || e.Type == "takeover" {
			claims = append(claims, e.At)
		}
	}
	require.Len(t, claims, 200)
	most := 0
	for i := range claims {
		n := 0
		for j := i; j < len(claims) && claims[j].Sub(claims[i]) < time.Second; j++ {
			n++
		}
		most = max(most, n)
	}
	require.LessOrEqual(t, most, 25, "at most rate + burst claims in any 1 s window")
	require.GreaterOrEqual(t, most, 20, "the rate was used")
}
