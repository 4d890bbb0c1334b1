package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// The demo's promise, checked on what a user sees: the paused worker is
// taken over, its late write is refused and never stored, every node is
// committed exactly once, and the run succeeds.
func TestDemoFencesOutThePausedWorker(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("demo output:\n%s", out.String())
		}
	})
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))

	o, err := play(ctx, &out, log)
	require.NoError(t, err)
	report(&out, o)
	last := -1
	for _, r := range timeline(o) {
		if r.seq >= 0 {
			require.Greater(t, r.seq, last, "the timeline keeps the stream's order")
			last = r.seq
		}
	}

	require.Equal(t, "SUCCEEDED", o.Run.Status)
	committed := map[string]int{}
	for _, e := range o.Events {
		if e.Type == "committed" {
			committed[e.Node]++
		}
	}
	for _, n := range o.Run.Nodes {
		require.Equal(t, "SUCCEEDED", n.State, n.ID)
		require.Equal(t, 1, committed[n.ID], "committed events of node %s", n.ID)
	}

	victim := o.Victim
	require.Equal(t, "deploy", victim.Node)
	require.EqualValues(t, 1, victim.Epoch)

	i := slices.IndexFunc(o.Events, func(e fence.Event) bool { return e.Type == "takeover" && e.Node == "deploy" })
	require.GreaterOrEqual(t, i, 0, "no takeover of deploy")
	takeover := o.Events[i]
	require.Equal(t, victim.Owner, takeover.Details["prev_owner"], "the takeover names the paused worker")
	require.NotEqual(t, victim.Owner, takeover.Worker)
	require.EqualValues(t, 2, takeover.Epoch)

	i = slices.IndexFunc(o.Events, func(e fence.Event) bool {
		return e.Type == "stale_rejected" && e.Node == "deploy" && (e.Details["op"] == "commit" || e.Details["op"] == "release")
	})
	require.GreaterOrEqual(t, i, 0, "no stale_rejected commit or release of deploy")
	stale := o.Events[i]
	require.Equal(t, victim.Owner, stale.Worker, "the refused write is the paused worker's")
	require.EqualValues(t, 1, stale.Epoch)

	deploy := nodeOf(o.Run, "deploy")
	var res struct {
		By    string `json:"deployed_by"`
		Epoch int64  `json:"epoch"`
	}
	require.NoError(t, json.Unmarshal(deploy.Result, &res))
	require.NotEqual(t, victim.Owner, res.By, "the paused worker's result must never be stored")
	require.Equal(t, deploy.Owner, res.By)
	require.Equal(t, deploy.Epoch, res.Epoch)
	require.Greater(t, deploy.Epoch, victim.Epoch)

	// The downstream fenced itself: it took the victim's call before the
	// takeover, and refuses the victim's token once it has seen a newer one.
	require.Equal(t, http.StatusConflict, o.Late)
	var accepted, rejected []int64
	for _, c := range o.Calls {
		if c.Token.Node != "deploy" {
			continue
		}
		if c.Admitted() {
			accepted = append(accepted, c.Token.Epoch)
		} else {
			rejected = append(rejected, c.Token.Epoch)
		}
	}
	require.Equal(t, []int64{1}, rejected)
	require.Contains(t, accepted, int64(1))
	require.Contains(t, accepted, deploy.Epoch)

	require.NoError(t, verify(o))
	require.Contains(t, out.String(), "stale_rejected")
	require.Contains(t, out.String(), "takeover")
}
