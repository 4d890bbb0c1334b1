package spec

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRetryDelay(t *testing.T) {
	t.Parallel()
	sec := time.Second
	// No policy: today's exponential with jitter, between the worker's bounds.
	for used := int64(1); used <= 12; used++ {
		want := min(sec<<(used-1), 5*time.Minute)
		d := RetryDelay("", used, sec, 5*time.Minute)
		require.True(t, d >= want/2 && d <= want, "attempt %d: %s not in [%s, %s]", used, d, want/2, want)
	}
	fixed := (&RetryPolicy{Backoff: "fixed", Base: Duration(2 * sec), Jitter: new(bool)}).encode()
	require.Equal(t, 2*sec, RetryDelay(fixed, 7, sec, 5*time.Minute))
	capped := (&RetryPolicy{Base: Duration(sec), Max: Duration(3 * sec), Jitter: new(bool)}).encode()
	require.Equal(t, 3*sec, RetryDelay(capped, 5, time.Millisecond, time.Hour))

	_, err := Parse([]byte(`{"nodes": [{"id": "a", "kind": "noop", "retry": {"backoff": "linear", "base": "2s", "max": "1s"}}]}`))
	require.ErrorContains(t, err, `nodes[0].retry.backoff: "linear": want exponential or fixed`)
	require.ErrorContains(t, err, "nodes[0].retry.max: 1s is below base 2s")
	_, err = Parse([]byte(`{"nodes": [{"id": "a", "kind": "noop", "retry": {"jiter": true}}]}`))
	require.ErrorContains(t, err, "nodes[0].retry.jiter: unknown field")
}
