package fence

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/redistest"
)

func put(ns []string, key, value string) ItemWrite {
	return ItemWrite{Namespace: ns, Key: key, Value: json.RawMessage(value)}
}

func keysOf(items []Item) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, it.Namespace[len(it.Namespace)-1]+"/"+it.Key)
	}
	return out
}

// The store's operations, as LangGraph's BaseStore defines them, on
// miniredis and on a real redis-server.
func TestStoreItems(t *testing.T) {
	t.Parallel()
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := t.Context()
			s := New(b.Client, nil)
			users := []string{"users", "u1"}

			// A put, then a read; a second put keeps the created time.
			require.NoError(t, s.PutItems(ctx, []ItemWrite{put(users, "prefs", `{"theme": "dark"}`)}))
			it, err := s.GetItem(ctx, users, "prefs", false)
			require.NoError(t, err)
			require.NotNil(t, it)
			require.JSONEq(t, `{"theme":"dark"}`, string(it.Value))
			require.Equal(t, users, it.Namespace)
			created := it.CreatedAt
			b.Advance(t, 5*time.Millisecond)
			require.NoError(t, s.PutItems(ctx, []ItemWrite{put(users, "prefs", `{"theme":"light"}`)}))
			it, err = s.GetItem(ctx, users, "prefs", false)
			require.NoError(t, err)
			require.Equal(t, created, it.CreatedAt, "an update keeps the item's creation time")
			require.True(t, it.UpdatedAt.After(created))
			require.JSONEq(t, `{"theme":"light"}`, string(it.Value))

			// A key that is not there, in a namespace that is not there.
			none, err := s.GetItem(ctx, []string{"nobody"}, "x", false)
			require.NoError(t, err)
			require.Nil(t, none)

			// Delete, twice (a retry): the item is gone, the namespace too.
			for range 2 {
				require.NoError(t, s.PutItems(ctx, []ItemWrite{{Namespace: users, Key: "prefs"}}))
			}
			it, err = s.GetItem(ctx, users, "prefs", false)
			require.NoError(t, err)
			require.Nil(t, it)
			nss, err := s.ListNamespaces(ctx, NamespaceQuery{})
			require.NoError(t, err)
			require.Empty(t, nss, "a namespace whose items are all deleted is not listed")

			// Search: prefix, filter, offset and limit.
			docs := []ItemWrite{
				put([]string{"docs", "a"}, "1", `{"type":"report","score":3,"tags":["x","y"],"meta":{"lang":"en","n":1}}`),
				put([]string{"docs", "a"}, "2", `{"type":"note","score":5}`),
				put([]string{"docs", "b"}, "3", `{"type":"report","score":4.5}`),
				put([]string{"docs", "b", "deep"}, "4", `{"type":"report","score":9}`),
				put([]string{"docsx"}, "5", `{"type":"report"}`),
			}
			require.NoError(t, s.PutItems(ctx, docs))
			all, err := s.SearchItems(ctx, ItemSearch{Prefix: []string{"docs"}})
			require.NoError(t, err)
			require.Equal(t, []string{"a/1", "a/2", "b/3", "deep/4"}, keysOf(all), "a prefix matches whole labels")
			for filter, want := range map[string][]string{
				`{"type":"report"}`:                     {"a/1", "b/3", "deep/4"},
				`{"score":{"$gt":3}}`:                   {"a/2", "b/3", "deep/4"},
				`{"score":{"$gte":3,"$lt":5}}`:          {"a/1", "b/3"},
				`{"type":{"$ne":"report"}}`:             {"a/2"},
				`{"tags":["x","y"]}`:                    {"a/1"},
				`{"tags":["y","x"]}`:                    {},
				`{"meta":{"lang":"en"}}`:                {"a/1"},
				`{"score":3.0,"type":{"$eq":"report"}}`: {"a/1"},
			} {
				var f map[string]any
				require.NoError(t, json.Unmarshal([]byte(filter), &f))
				got, err := s.SearchItems(ctx, ItemSearch{Prefix: []string{"docs"}, Filter: f})
				require.NoError(t, err)
				require.Equal(t, want, keysOf(got), "filter %s", filter)
			}
			page, err := s.SearchItems(ctx, ItemSearch{Offset: 1, Limit: 2})
			require.NoError(t, err)
			require.Equal(t, []string{"a/2", "b/3"}, keysOf(page))

			// list_namespaces: prefix, suffix, wildcards, depth, paging.
			for _, c := range []struct {
				q    NamespaceQuery
				want [][]string
			}{
				{NamespaceQuery{}, [][]string{{"docs", "a"}, {"docs", "b"}, {"docs", "b", "deep"}, {"docsx"}}},
				{NamespaceQuery{Prefix: []string{"docs"}}, [][]string{{"docs", "a"}, {"docs", "b"}, {"docs", "b", "deep"}}},
				{NamespaceQuery{Suffix: []string{"b"}}, [][]string{{"docs", "b"}}},
				{NamespaceQuery{Prefix: []string{"*", "b"}}, [][]string{{"docs", "b"}, {"docs", "b", "deep"}}},
				{NamespaceQuery{MaxDepth: 1}, [][]string{{"docs"}, {"docsx"}}},
				{NamespaceQuery{MaxDepth: 2, Offset: 1, Limit: 1}, [][]string{{"docs", "b"}}},
			} {
				got, err := s.ListNamespaces(ctx, c.q)
				require.NoError(t, err)
				require.Equal(t, c.want, got, "%+v", c.q)
			}

			// A time to live: the item is gone after it, unless a read
			// with refresh restarted it.
			mem := []string{"mem"}
			require.NoError(t, s.PutItems(ctx, []ItemWrite{
				{Namespace: mem, Key: "short", Value: []byte(`{}`), TTL: 100 * time.Millisecond},
				{Namespace: mem, Key: "kept", Value: []byte(`{}`), TTL: 100 * time.Millisecond},
			}))
			b.Advance(t, 60*time.Millisecond)
			it, err = s.GetItem(ctx, mem, "kept", true)
			require.NoError(t, err)
			require.NotNil(t, it)
			b.Advance(t, 60*time.Millisecond)
			gone, err := s.GetItem(ctx, mem, "short", false)
			require.NoError(t, err)
			require.Nil(t, gone, "past its ttl")
			it, err = s.GetItem(ctx, mem, "kept", false)
			require.NoError(t, err)
			require.NotNil(t, it, "its ttl restarted at the refreshing read")
			require.Equal(t, 100*time.Millisecond, it.TTL)
			b.Advance(t, 120*time.Millisecond)
			got, err := s.SearchItems(ctx, ItemSearch{Prefix: mem})
			require.NoError(t, err)
			require.Empty(t, got)
			nss, err = s.ListNamespaces(ctx, NamespaceQuery{Prefix: mem})
			require.NoError(t, err)
			require.Empty(t, nss, "a namespace of expired items is not listed")
		})
	}
}

// A put cut between its two steps (indexed, items not written) leaves an
// index entry that no reader shows; the next put of that namespace is
// found.
func TestStoreItemsPutCutAfterIndex(t *testing.T) {
	t.Parallel()
	_, rdb := redistest.Mini(t)
	s := New(rdb, nil)
	ctx := t.Context()
	_, err := s.run(ctx, "store_index", []string{s.keys.StoreIndex(), s.keys.StoreIndexed()}, "half.done")
	require.NoError(t, err)
	nss, err := s.ListNamespaces(ctx, NamespaceQuery{})
	require.NoError(t, err)
	require.Empty(t, nss)
	items, err := s.SearchItems(ctx, ItemSearch{})
	require.NoError(t, err)
	require.Empty(t, items)
	require.NoError(t, s.PutItems(ctx, []ItemWrite{put([]string{"half", "done"}, "k", `{"v":1}`)}))
	nss, err = s.ListNamespaces(ctx, NamespaceQuery{})
	require.NoError(t, err)
	require.Equal(t, [][]string{{"half", "done"}}, nss)
}

// Bad input is refused naming what is wrong, and nothing is stored.
func TestStoreItemsBadInput(t *testing.T) {
	t.Parallel()
	_, rdb := redistest.Mini(t)
	s := New(rdb, nil)
	ctx := t.Context()
	long := make([]byte, MaxNamespaceLabel+1)
	for i := range long {
		long[i] = 'a'
	}
	for _, c := range []struct {
		w    ItemWrite
		want error
		msg  string
	}{
		{put([]string{"a.b"}, "k", `{}`), ErrInvalidNamespace, "cannot contain periods"},
		{put([]string{"a", ""}, "k", `{}`), ErrInvalidNamespace, "cannot be empty"},
		{put(nil, "k", `{}`), ErrInvalidNamespace, "at least one label"},
		{put([]string{"langgraph"}, "k", `{}`), ErrInvalidNamespace, `"langgraph"`},
		{put([]string{string(long)}, "k", `{}`), ErrInvalidNamespace, "at most 256"},
		{put([]string{"a"}, "k", `[1]`), ErrInvalidItem, "JSON object"},
		{put([]string{"a"}, "k", `{`), ErrInvalidItem, "not JSON"},
		{put([]string{"a"}, string(make([]byte, MaxItemKey+1)), `{}`), ErrInvalidItem, "at most 1024"},
	} {
		err := s.PutItems(ctx, []ItemWrite{put([]string{"ok"}, "first", `{}`), c.w})
		require.ErrorIs(t, err, c.want)
		require.ErrorContains(t, err, c.msg)
	}
	nss, err := s.ListNamespaces(ctx, NamespaceQuery{})
	require.NoError(t, err)
	require.Empty(t, nss, "a batch with a bad write writes nothing")
	_, err = s.SearchItems(ctx, ItemSearch{Filter: map[string]any{"a": map[string]any{"$regex": "x"}}})
	require.ErrorIs(t, err, ErrInvalidItem)
}

// On a Redis Cluster, a namespace's keys share a slot and the index has
// its own: every operation works across masters.
func TestStoreItemsCluster(t *testing.T) {
	t.Parallel()
	rc := redistest.StartCluster(t, redistest.ClusterOptions{})
	s := New(rc.Client(), nil)
	ctx := t.Context()
	var writes []ItemWrite
	for _, u := range []string{"u1", "u2", "u3", "u4", "u5", "u6"} {
		writes = append(writes, put([]string{"users", u}, "prefs", `{"n":1}`))
	}
	require.NoError(t, s.PutItems(ctx, writes))
	items, err := s.SearchItems(ctx, ItemSearch{Prefix: []string{"users"}, Limit: 100, Refresh: true})
	require.NoError(t, err)
	require.Len(t, items, 6)
	nss, err := s.ListNamespaces(ctx, NamespaceQuery{Prefix: []string{"users"}})
	require.NoError(t, err)
	require.Len(t, nss, 6)
	it, err := s.GetItem(ctx, []string{"users", "u4"}, "prefs", true)
	require.NoError(t, err)
	require.NotNil(t, it)
	slots := map[uint16]bool{}
	for _, w := range writes {
		slots[Slot(s.keys.StoreItems("users."+w.Namespace[1]))] = true
	}
	require.Greater(t, len(slots), 1, "the namespaces spread over slots")
}

// BenchmarkStoreItems: a put (two scripts), a get (one), and a search of
// one namespace of 100 items, on a real redis-server.
func BenchmarkStoreItems(b *testing.B) {
	srv := redistest.Start(b)
	s := New(srv.Client(b), nil)
	ctx := b.Context()
	ns := []string{"bench", "u1"}
	for i := range 100 {
		require.NoError(b, s.PutItems(ctx, []ItemWrite{put(ns, "k"+strconv.Itoa(i), `{"n":1,"text":"a memory of some length"}`)}))
	}
	b.Run("put", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if err := s.PutItems(ctx, []ItemWrite{put(ns, "k"+strconv.Itoa(i%100), `{"n":2,"text":"a memory of some length"}`)}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("get", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.GetItem(ctx, ns, "k7", true); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("search100", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.SearchItems(ctx, ItemSearch{Prefix: ns, Filter: map[string]any{"n": 2.0}}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
