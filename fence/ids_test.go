package fence_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// TestValidateID: nothing that could forge a hash tag, reach another key or
// split a token gets into a key.
func TestValidateID(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"a", "run-1", "Node_2.v3", strings.Repeat("x", fence.MaxIDLen), ".a", "a..b", "..-", "_"} {
		require.NoError(t, fence.ValidateID("run id", id), id)
	}
	for name, id := range map[string]string{
		"open brace":  "a{b",
		"close brace": "a}b",
		"hash tag":    "{thread}",
		"colon":       "run:x",
		"space":       "a b",
		"slash":       "a/b",
		"at":          "a@1",
		"newline":     "a\nb",
		"unicode":     "nöde",
		"empty":       "",
		"129 bytes":   strings.Repeat("x", fence.MaxIDLen+1),
		"dot":         ".",
		"dot dot":     "..",
		"only dots":   "...",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := fence.ValidateID("nodes[3].id", id)
			require.ErrorIs(t, err, fence.ErrInvalidID)
			require.Contains(t, err.Error(), "nodes[3].id", "the message names the field")
		})
	}
}

// TestToken: a lease's token survives the trip through an environment
// variable or a header, and garbage is refused.
func TestToken(t *testing.T) {
	t.Parallel()
	l := fence.Lease{Thread: "th", Run: "run-1", Node: "deploy", Epoch: 42, ClaimID: "c0ffee"}
	tok := l.Token()
	require.Equal(t, "run-1/deploy@42/c0ffee", tok.String())
	require.Equal(t, "run-1/deploy", tok.Resource())
	back, err := fence.ParseToken(tok.String())
	require.NoError(t, err)
	require.Equal(t, tok, back)

	for _, s := range []string{
		"",
		"garbage",
		"run-1/deploy",                        // no epoch
		"run-1@42/c",                          // no node
		"run-1/deploy@42",                     // no claim
		"run-1/deploy@42/",                    // empty claim
		"run-1/deploy@x/c",                    // epoch not a number
		"run-1/deploy@0/c",                    // epoch not positive
		"run-1/deploy@-3/c",                   // negative epoch
		"run{1}/deploy@4/c",                   // brace in run
		"run-1/de:ploy@4/c",                   // colon in node
		"/deploy@4/c",                         // empty run
		"run-1/@4/c",                          // empty node
		"run-1/deploy@99999999999999999999/c", // overflows int64
	} {
		_, err := fence.ParseToken(s)
		require.Error(t, err, "%q", s)
	}
}

// TestValidateIDRefusesDotSegments: an id of dots alone would be stored and
// then be unreachable at /v1/runs/{id}, because URL paths resolve "." and
// "..". The error says why.
func TestValidateIDRefusesDotSegments(t *testing.T) {
	t.Parallel()
	for _, id := range []string{".", "..", "...."} {
		err := fence.ValidateID("run id", id)
		require.ErrorIs(t, err, fence.ErrInvalidID, "%q", id)
		require.Contains(t, err.Error(), "only dots", "%q", id)
	}
}
