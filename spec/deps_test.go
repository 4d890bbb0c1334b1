package spec_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/spec"
)

// A node's input reads its dependencies' results through {"$dep": ...}
// references; a reference that cannot resolve fails, saying which.
func TestResolveRefs(t *testing.T) {
	t.Parallel()
	deps := map[string]json.RawMessage{"fetch": json.RawMessage(`{"items":[{"url":"u0"},{"url":"u1"}],"n":1.50}`)}
	for _, c := range []struct{ in, want, err string }{
		{in: `{"a": 1}`, want: `{"a": 1}`}, // no reference: byte for byte
		{in: `{"$dep":"fetch"}`, want: `{"items":[{"url":"u0"},{"url":"u1"}],"n":1.50}`},
		{in: `{"u":{"$dep":"fetch","path":"items.1.url"},"k":[{"$dep":"fetch","path":"n"}]}`, want: `{"k":[1.50],"u":"u1"}`},
		{in: `{"$dep":"fetch","path":""}`, want: `{"items":[{"url":"u0"},{"url":"u1"}],"n":1.50}`},
		{in: `{"$dep":"other"}`, err: `input reference {"$dep":"other"}: other is not a direct dependency`},
		{in: `{"$dep":"fetch","path":"items.2"}`, err: `fetch's result has no index "2" (length 2)`},
		{in: `{"$dep":"fetch","path":"n.x"}`, err: `fetch's result has no "x": not an object or array there`},
		{in: `{"$dep":"fetch","pth":"n"}`, err: `only "$dep" and "path" are allowed`},
		{in: `{"$dep":7}`, err: `"$dep" must be a node id`},
	} {
		got, err := spec.ResolveRefs(json.RawMessage(c.in), deps)
		if c.err != "" {
			require.ErrorContains(t, err, c.err, c.in)
			continue
		}
		require.NoError(t, err, c.in)
		require.Equal(t, c.want, string(got), c.in)
	}
}
