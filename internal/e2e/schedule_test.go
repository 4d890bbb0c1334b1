package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/spec"
)

// scheduleStatus is `enqueue schedule list --json`, the fields read here.
type scheduleStatus struct {
	Name    string     `json:"name"`
	Next    time.Time  `json:"next"`
	Last    *time.Time `json:"last"`
	LastRun string     `json:"last_run"`
	Error   string     `json:"error"`
}

func (c *cluster) schedules() map[string]scheduleStatus {
	c.t.Helper()
	out, errOut, code := c.enqueue("", "schedule", "list", "--json")
	require.Equal(c.t, 0, code, "schedule list: %s", errOut)
	var list []scheduleStatus
	require.NoError(c.t, json.Unmarshal([]byte(out), &list), out)
	m := map[string]scheduleStatus{}
	for _, s := range list {
		m[s.Name] = s
	}
	return m
}

// TestScheduleEverySecondThreeRunnersOneKilled is issue 33's must-hold for
// cron: three runner processes fire an every-second schedule for 20 s,
// and one of them is killed (SIGKILL) midway. Every tick from the first to
// the last has exactly one run, each submitted once and run once, with no
// gap while a runner was up; more than one runner fired ticks (no leader).
func TestScheduleEverySecondThreeRunnersOneKilled(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	env := map[string]string{"SCHEDULE_INTERVAL": "100ms", "LOG_LEVEL": "info"}
	runners := []*runnerProc{c.startRunner("r1", env), c.startRunner("r2", env), c.startRunner("r3", env)}

	out, errOut, code := c.enqueue(`{"nodes": [{"id": "a", "kind": "noop"}]}`,
		"schedule", "add", "every", "--cron", "* * * * * *", "-")
	require.Equal(t, 0, code, errOut)
	first, ok := strings.CutPrefix(strings.TrimSpace(out), "every next ")
	require.True(t, ok, out)
	added, err := time.Parse(time.RFC3339, first)
	require.NoError(t, err)

	lastAtLeast := func(d time.Duration) func() bool {
		return func() bool {
			s := c.schedules()["every"]
			return s.Last != nil && !s.Last.Before(added.Add(d))
		}
	}
	waitUntil(t, 30*time.Second, "ten seconds of ticks", lastAtLeast(10*time.Second))
	// Kill a runner that has fired ticks (the one that fired most): which
	// runner wins a tick is a race, and killing one that never fired would
	// show nothing about the others taking over.
	fired := func(r *runnerProc) int { return strings.Count(r.log.String(), "msg=schedule_fired") }
	victim := slices.MaxFunc(runners, func(a, b *runnerProc) int { return fired(a) - fired(b) })
	require.Positive(t, fired(victim), "ten seconds of ticks were fired by some runner")
	victim.signal(t, syscall.SIGKILL)
	killedAt := c.schedules()["every"].Last
	waitUntil(t, 30*time.Second, "twenty seconds of ticks", lastAtLeast(20*time.Second))
	_, errOut, code = c.enqueue("", "schedule", "rm", "every")
	require.Equal(t, 0, code, errOut)

	rdb := c.redis.Client(t)
	cl, err := client.New(client.Config{Redis: rdb})
	require.NoError(t, err)
	defer cl.Close()
	ctx := t.Context()
	list, err := cl.List(ctx, "", 1000)
	require.NoError(t, err)
	var ticks []time.Time
	for _, r := range list {
		if !strings.HasPrefix(r.ID, "cron.every.") {
			continue
		}
		tick, err := time.Parse("20060102T150405Z", strings.TrimPrefix(r.ID, "cron.every."))
		require.NoError(t, err, r.ID)
		ticks = append(ticks, tick)
	}
	slices.SortFunc(ticks, func(a, b time.Time) int { return a.Compare(b) })
	require.GreaterOrEqual(t, len(ticks), 21, "20 s of every-second ticks")
	require.Equal(t, added.UTC(), ticks[0], "the first tick after the schedule was added")
	for i := 1; i < len(ticks); i++ {
		require.Equal(t, time.Second, ticks[i].Sub(ticks[i-1]), "no gap between %s and %s (a runner killed after %s)",
			ticks[i-1], ticks[i], killedAt)
	}
	require.True(t, ticks[len(ticks)-1].After(killedAt.Add(5*time.Second)), "ticks went on after the kill")

	// Each tick's run was submitted once and its node ran once.
	for _, tick := range ticks {
		id := spec.RunID("every", tick)
		waitUntil(t, 30*time.Second, id+" ended", func() bool {
			info, err := cl.Status(ctx, id)
			require.NoError(t, err)
			return info.Status == "SUCCEEDED"
		})
		evs, err := cl.Events(ctx, id, "", 0)
		require.NoError(t, err)
		counts := map[string]int{}
		for _, e := range evs {
			counts[e.Type]++
		}
		require.Equal(t, 1, counts["submitted"], "%s: %v", id, counts)
		require.Equal(t, 1, counts["committed"], "%s: %v", id, counts)
	}

	// No leader: the killed runner had fired ticks, and others fired the
	// ticks after it died.
	firers := 0
	for _, r := range runners {
		if strings.Contains(r.log.String(), "msg=schedule_fired") {
			firers++
		}
	}
	require.GreaterOrEqual(t, firers, 2, "ticks fired by several runners")
	t.Logf("%d ticks, one run each, from %s to %s; a runner killed after %s; %d runners fired",
		len(ticks), ticks[0].Format(time.TimeOnly), ticks[len(ticks)-1].Format(time.TimeOnly), killedAt.Format(time.TimeOnly), firers)
}
