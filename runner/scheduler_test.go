package runner_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/spec"
)

// TestSchedulerFiresEveryTickOnceWithTwoWorkers: two workers firing an
// every-second schedule make one run per tick, and the runs succeed.
func TestSchedulerFiresEveryTickOnceWithTwoWorkers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := newRecorder()
	for _, id := range []string{"w1", "w2"} {
		cfg := b.fastConfig(id)
		cfg.ScheduleInterval = 50 * time.Millisecond
		b.worker(cfg, map[string]runner.Kind{"rec": rec})
	}
	ctx := context.Background()
	_, _, err := b.client.PutSchedule(ctx, &spec.Schedule{Name: "tick", Cron: "* * * * * *",
		Run: &spec.Run{Nodes: []spec.Node{{ID: "a", Kind: "rec"}}}})
	require.NoError(t, err)

	var runs []string
	waitFor(t, 10*time.Second, "three ticks' runs", func() bool {
		list, err := b.client.List(ctx, "", 100)
		require.NoError(t, err)
		runs = runs[:0]
		for _, r := range list {
			if strings.HasPrefix(r.ID, "cron.tick.") {
				runs = append(runs, r.ID)
			}
		}
		return len(runs) >= 3
	})
	require.NoError(t, b.client.DeleteSchedule(ctx, "tick"))
	for _, id := range runs {
		info := b.waitRun(id, 10*time.Second)
		require.Equal(t, "SUCCEEDED", info.Status)
		require.Equal(t, map[string]int{"": 1}, countEvents(b.events(id), "submitted"), "%s submitted once", id)
	}
	st, err := b.client.Schedules(ctx)
	require.NoError(t, err)
	require.Empty(t, st)
}
