package runner_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/runner"
)

// gatherGauges returns every gauge of reg as "name,label values" -> value.
func gatherGauges(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetValue()
			}
			got[key] = m.GetGauge().GetValue()
		}
	}
	return got
}

// A scrape shows each limit as set and what is in use under it: slots
// held, nodes waiting, rate tokens left; a prefix rule is one series whose
// figures add up its keys, so its labels never grow with the tenants.
func TestLimitCollectorReportsUse(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	c, err := runner.NewClient(runner.ClientConfig{Redis: rdb})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	ctx := t.Context()
	// 10 a minute: a token comes back every 6 s, so the count read below
	// is the one the claims left, however slowly a loaded machine gets
	// there (at 10/s, 100 ms gave the spent token back).
	require.NoError(t, c.SetLimit(ctx, fence.Limit{Name: "openai", Concurrency: 1, Rate: 10, Period: time.Minute, Burst: 2}))
	require.NoError(t, c.SetLimit(ctx, fence.Limit{Name: "tenant:*", Concurrency: 1}))
	require.NoError(t, c.SetLimit(ctx, fence.Limit{Name: "idle", Rate: 60, Period: time.Minute}))

	reg := prometheus.NewRegistry()
	reg.MustRegister(runner.NewLimitCollector(c.Store()))
	got := gatherGauges(t, reg)
	require.Equal(t, 0.0, got["baton_limit_in_use,openai"])
	require.Equal(t, 3.0, got["baton_limit_tokens_left,openai"], "idle: burst+1")
	require.Equal(t, 0.0, got["baton_limit_keys,tenant:*"], "no tenant has claimed yet")
	require.Equal(t, 0.0, got["baton_limit_waiting,tenant:*"])

	for _, r := range []string{"o1", "o2", "acme1", "acme2", "globex1"} {
		lim := map[string]string{"o": `"openai"`, "a": `"tenant:acme"`, "g": `"tenant:globex"`}[r[:1]]
		spec, err := runner.ParseSpec([]byte(`{"id":"` + r + `","nodes":[{"id":"n","kind":"noop","limits":[` + lim + `]}]}`))
		require.NoError(t, err)
		_, err = c.Submit(ctx, spec)
		require.NoError(t, err)
		_, err = c.Store().Claim(ctx, fence.NodeRef{Thread: r, Run: r, Node: "n"}, "w1", time.Minute, 0)
		if r == "o2" || r == "acme2" {
			require.ErrorIs(t, err, fence.ErrLimitWait, r)
		} else {
			require.NoError(t, err, r)
		}
	}
	got = gatherGauges(t, reg)
	for series, want := range map[string]float64{
		"baton_limit_concurrency,openai":     1,
		"baton_limit_rate_per_second,openai": 10.0 / 60,
		"baton_limit_burst,openai":           2,
		"baton_limit_in_use,openai":          1,
		"baton_limit_waiting,openai":         1,
		"baton_limit_tokens_left,openai":     2, // o2 waits for a slot: only o1 spent a token
		"baton_limit_keys,openai":            1,
		"baton_limit_concurrency,tenant:*":   1,
		"baton_limit_in_use,tenant:*":        2, // acme1 and globex1
		"baton_limit_waiting,tenant:*":       1, // acme2
		"baton_limit_keys,tenant:*":          2,
		"baton_limit_rate_per_second,idle":   1,
		"baton_limit_tokens_left,idle":       1,
		"baton_limits_unreadable":            0,
	} {
		require.Contains(t, got, series)
		require.Equal(t, want, got[series], series)
	}
	require.NotContains(t, got, "baton_limit_in_use,idle", "a rate-only limit has no slots")
	require.NotContains(t, got, "baton_limit_tokens_left,tenant:*", "a concurrency-only limit has no tokens")
}
