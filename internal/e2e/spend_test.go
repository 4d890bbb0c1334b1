package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// limitTokens reads the rate tokens left of a limit key from
// `enqueue limit list --json`.
func (c *cluster) limitTokens(name, key string) int64 {
	c.t.Helper()
	out, errOut, code := c.enqueue("", "limit", "list", "--json")
	require.Equal(c.t, 0, code, errOut)
	var ls []struct {
		Name string `json:"name"`
		Keys []struct {
			Key    string `json:"key"`
			Tokens *int64 `json:"tokens"`
		} `json:"keys"`
	}
	require.NoError(c.t, json.Unmarshal([]byte(out), &ls), out)
	for _, l := range ls {
		for _, k := range l.Keys {
			if l.Name == name && k.Key == key && k.Tokens != nil {
				return *k.Tokens
			}
		}
	}
	c.t.Fatalf("limit %s key %s has no tokens listed: %s", name, key, out)
	return 0
}

// An exec node that prints "::spend N" after its call: the commit charges
// what it spent beyond the cost its claim took to the limit it named with
// a cost, a failed attempt refunds what it did not spend, a limit named
// without a cost is not charged, and a bad ::spend line is logged and
// ignored. Read back with enqueue limit list, as a user would.
func TestSpendLineChargesTheRateLimit(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	// 100 an hour, burst 50: 51 tokens when idle, one token every 36 s,
	// so no count moves while the test runs.
	for _, name := range []string{"tpm", "rpm"} {
		_, errOut, code := c.enqueue("", "limit", "set", name, "--rate", "100/h", "--burst", "50")
		require.Equal(t, 0, code, errOut)
	}
	r := c.startRunner("r0", nil)
	limits := `"limits":["rpm",{"name":"tpm","cost":10}]`

	run := c.submit(`{"id":"spent","nodes":[{"id":"a","kind":"exec",` + limits + `,"input":` +
		sh(`echo '::spend 25'; echo '::spend many'; echo '::spend 5'; echo answered`) + `}]}`)
	require.Equal(t, 0, c.watch(run))
	require.Equal(t, "SUCCEEDED", c.status(run).Status)
	require.Equal(t, int64(21), c.limitTokens("tpm", "tpm"), "30 spent: 10 reserved by the claim, 20 charged by the commit")
	require.Equal(t, int64(50), c.limitTokens("rpm", "rpm"), "rpm counts the claim only")
	var committed []event
	for _, e := range c.events(run) {
		if e.Type == "committed" {
			committed = append(committed, e)
		}
	}
	require.Len(t, committed, 1)
	require.Equal(t, "30", committed[0].Details["spent"])
	require.Equal(t, "tpm=20", committed[0].Details["charged"])
	require.Equal(t, `"answered"`, string(c.status(run).node("a").Result), "::spend lines are not the result")
	require.Contains(t, r.log.String(), "spend_line_ignored")

	failed := c.submit(`{"id":"refunded","nodes":[{"id":"a","kind":"exec","max_attempts":1,` + limits + `,"input":` +
		sh(`echo '::spend 2'; exit 3`) + `}]}`)
	c.watch(failed)
	require.Equal(t, "FAILED", c.status(failed).Status)
	require.Equal(t, int64(19), c.limitTokens("tpm", "tpm"), "the failed call spent 2 of the 10 its claim took: 8 refunded")
	require.Equal(t, int64(49), c.limitTokens("rpm", "rpm"))
	require.False(t, strings.Contains(r.log.String(), "panic"))
}
