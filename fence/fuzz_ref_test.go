package fence_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// FuzzRef: ids that pass ValidateID build keys and refs that reach nothing
// else. A ref of three valid ids splits back into exactly them, and the
// node's key carries one hash tag, its thread's shard's, so no id can move a key to
// another slot or into another key's namespace.
func FuzzRef(f *testing.F) {
	for _, s := range [][3]string{
		{"chat-7", "deploy-42", "migrate"},
		{"a", "b", "c"},
		{"Run_1.v2", "x", strings.Repeat("n", fence.MaxIDLen)},
		{"{x}", "a:b", ".."},
		{"", "run", "node"},
		{"t", "r", "a/b"},
		{"t", "...", "n"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, thread, run, node string) {
		for _, id := range []string{thread, run, node} {
			if fence.ValidateID("id", id) != nil {
				return
			}
			require.LessOrEqual(t, len(id), fence.MaxIDLen)
			require.NotContains(t, id, ":", "a colon would split a ref or a key")
			require.False(t, strings.ContainsAny(id, "{}"), "a brace would forge a hash tag")
			require.NotEmpty(t, strings.Trim(id, "."), "dots alone are a relative URL segment")
		}
		th, r, n, ok := fence.ParseRef(fence.Ref(thread, run, node))
		require.True(t, ok)
		require.Equal(t, [3]string{thread, run, node}, [3]string{th, r, n})

		key := fence.Keys{}.Node(thread, run, node)
		require.Equal(t, 1, strings.Count(key, "{"), key)
		require.Equal(t, 1, strings.Count(key, "}"), key)
		// The key carries its shard's tag, the tag of the indexes its
		// scripts write: one slot.
		leases := fence.Keys{}.Leases(fence.ShardOf(thread))
		tag := leases[strings.Index(leases, "{") : strings.Index(leases, "}")+1]
		require.Equal(t, "baton:"+tag+":"+thread+":node:"+run+":"+node, key)
		require.Equal(t, fence.Slot(leases), fence.Slot(key))
	})
}

// FuzzParseRef: whatever an index holds, ParseRef never panics, and a
// string it accepts is exactly the ref its parts build.
func FuzzParseRef(f *testing.F) {
	for _, s := range []string{"chat-7:deploy-42:migrate", "a:b", "a:b:c:d", "::", "", "t:r:n:", "{t}:r:n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		thread, run, node, ok := fence.ParseRef(s)
		if !ok {
			require.NotEqual(t, 2, strings.Count(s, ":"), "a ref of three parts was refused: %q", s)
			return
		}
		require.Equal(t, s, fence.Ref(thread, run, node))
	})
}
