package fence

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/redistest"
)

// exerciseAgentScripts calls every script of the API's records, for
// TestBindings and TestScriptsTouchOneSlot.
func exerciseAgentScripts(t *testing.T, s *Store, id string) {
	t.Helper()
	ctx := t.Context()
	th, _, err := s.PutAgentThread(ctx, id+"-api", []byte(`{"a":1}`), "raise", "op1")
	require.NoError(t, err)
	_, err = s.WriteAgentThread(ctx, th.ID, th.Rev, "op2", map[string]string{"metadata": `{"a":2}`})
	require.NoError(t, err)
	require.NoError(t, s.DeleteAgentThread(ctx, th.ID, "op3"))
	a, _, err := s.PutAssistant(ctx, id+"-asst", map[string]string{"graph_id": `"g"`}, []byte(`{}`), "raise", "op1")
	require.NoError(t, err)
	_, err = s.WriteAssistant(ctx, a.ID, a.Rev, 0, []byte(`{}`), map[string]string{"name": `"n"`}, "op2")
	require.NoError(t, err)
	require.NoError(t, s.DeleteAssistant(ctx, a.ID, "op3"))
	src := id + "-cpsrc"
	nsKeys := s.keys.CheckpointNS(src, "ns")
	require.NoError(t, s.rdb.HSet(ctx, s.keys.Checkpoints(src), "ns", "1").Err())
	require.NoError(t, s.rdb.ZAdd(ctx, nsKeys[0], redis.Z{Score: 1, Member: "1"}).Err())
	require.NoError(t, s.rdb.HSet(ctx, nsKeys[1], "1:d", "{}").Err())
	n, err := s.CopyCheckpoints(ctx, src, id+"-cpdst")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = s.KeepLatestCheckpoints(ctx, id+"-cpdst")
	require.NoError(t, err)
}

// TestAgentThreadRecord: a thread's record is created once, if_exists
// decides what a second create does, a write names the rev it read, a
// delete removes it from the listing, and every call retried with its op
// id answers as it first did.
func TestAgentThreadRecord(t *testing.T) {
	t.Parallel()
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := t.Context()
			s := New(b.Client, nil)
			th, created, err := s.PutAgentThread(ctx, "t1", []byte(`{"user":"ann"}`), "raise", "c1")
			require.NoError(t, err)
			require.True(t, created)
			require.JSONEq(t, `{"user":"ann"}`, string(th.Metadata))
			require.False(t, th.CreatedAt.IsZero())

			again, created, err := s.PutAgentThread(ctx, "t1", []byte(`{}`), "raise", "c1")
			require.NoError(t, err, "the retry of the create answers as the create")
			require.True(t, created)
			require.Equal(t, th.CreatedAt, again.CreatedAt)

			_, _, err = s.PutAgentThread(ctx, "t1", []byte(`{}`), "raise", "c2")
			require.ErrorIs(t, err, ErrExists)
			same, created, err := s.PutAgentThread(ctx, "t1", []byte(`{"x":1}`), "do_nothing", "c3")
			require.NoError(t, err)
			require.False(t, created)
			require.JSONEq(t, `{"user":"ann"}`, string(same.Metadata), "do_nothing changes nothing")

			w, err := s.WriteAgentThread(ctx, "t1", th.Rev, "w1", map[string]string{"metadata": `{"user":"bob"}`})
			require.NoError(t, err)
			require.Equal(t, th.Rev+1, w.Rev)
			_, err = s.WriteAgentThread(ctx, "t1", th.Rev, "w2", map[string]string{"metadata": `{"user":"eve"}`})
			require.ErrorIs(t, err, ErrRecordChanged, "a write from a stale read")
			w1, err := s.WriteAgentThread(ctx, "t1", th.Rev, "w1", map[string]string{"metadata": `{"user":"bob"}`})
			require.NoError(t, err, "the retry of the write answers as the write")
			require.Equal(t, w.Rev, w1.Rev)
			got, err := s.AgentThread(ctx, "t1")
			require.NoError(t, err)
			require.JSONEq(t, `{"user":"bob"}`, string(got.Metadata))
			_, err = s.WriteAgentThread(ctx, "nope", 1, "w3", map[string]string{"metadata": `{}`})
			require.ErrorIs(t, err, ErrNotFound)

			_, _, err = s.PutAgentThread(ctx, "t2", []byte(`{}`), "raise", "c4")
			require.NoError(t, err)
			ids, err := s.AgentThreadIDs(ctx)
			require.NoError(t, err)
			require.ElementsMatch(t, []string{"t1", "t2"}, ids)

			require.NoError(t, s.DeleteAgentThread(ctx, "t1", "d1"))
			require.NoError(t, s.DeleteAgentThread(ctx, "t1", "d1"), "the retry of the delete answers as the delete")
			require.ErrorIs(t, s.DeleteAgentThread(ctx, "t1", "d2"), ErrNotFound)
			_, err = s.AgentThread(ctx, "t1")
			require.ErrorIs(t, err, ErrNotFound)
			ids, err = s.AgentThreadIDs(ctx)
			require.NoError(t, err)
			require.Equal(t, []string{"t2"}, ids)

			_, _, err = s.PutAgentThread(ctx, "t{x}", []byte(`{}`), "raise", "c5")
			require.ErrorIs(t, err, ErrInvalidID, "an id that could forge a hash tag")
		})
	}
}

// TestAssistantRecord: an assistant's patch adds a version, "latest"
// makes an old one current without adding one, and deleting it removes
// its versions.
func TestAssistantRecord(t *testing.T) {
	t.Parallel()
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := t.Context()
			s := New(b.Client, nil)
			a, created, err := s.PutAssistant(ctx, "a1", map[string]string{"graph_id": `"agent"`, "name": `"one"`},
				[]byte(`{"name":"one"}`), "raise", "c1")
			require.NoError(t, err)
			require.True(t, created)
			require.Equal(t, int64(1), a.Version)
			require.Equal(t, `"agent"`, a.Fields["graph_id"])
			_, _, err = s.PutAssistant(ctx, "a1", map[string]string{"graph_id": `"x"`}, []byte(`{}`), "raise", "c2")
			require.ErrorIs(t, err, ErrExists)

			p, err := s.WriteAssistant(ctx, "a1", a.Rev, 0, []byte(`{"name":"two"}`), map[string]string{"name": `"two"`}, "p1")
			require.NoError(t, err)
			require.Equal(t, int64(2), p.Version)
			require.Equal(t, `"two"`, p.Fields["name"])
			require.Equal(t, `"agent"`, p.Fields["graph_id"], "fields not named stay")
			again, err := s.WriteAssistant(ctx, "a1", a.Rev, 0, []byte(`{"name":"two"}`), map[string]string{"name": `"two"`}, "p1")
			require.NoError(t, err, "the retry of the patch answers as the patch")
			require.Equal(t, int64(2), again.Max, "and adds no version")

			l, err := s.WriteAssistant(ctx, "a1", p.Rev, 1, nil, map[string]string{"name": `"one"`}, "l1")
			require.NoError(t, err)
			require.Equal(t, int64(1), l.Version)
			require.Equal(t, int64(2), l.Max)
			_, err = s.WriteAssistant(ctx, "a1", l.Rev, 9, nil, nil, "l2")
			require.ErrorIs(t, err, ErrNoVersion)
			_, err = s.WriteAssistant(ctx, "a1", a.Rev, 0, []byte(`{}`), nil, "p2")
			require.ErrorIs(t, err, ErrRecordChanged)

			vs, err := s.AssistantVersions(ctx, "a1")
			require.NoError(t, err)
			require.Len(t, vs, 2)
			require.Equal(t, int64(2), vs[0].Version)
			require.JSONEq(t, `{"name":"two"}`, string(vs[0].Doc))

			ids, err := s.AssistantIDs(ctx)
			require.NoError(t, err)
			require.Equal(t, []string{"a1"}, ids)
			require.NoError(t, s.DeleteAssistant(ctx, "a1", "d1"))
			require.NoError(t, s.DeleteAssistant(ctx, "a1", "d1"), "the retry of the delete answers as the delete")
			require.ErrorIs(t, s.DeleteAssistant(ctx, "a1", "d2"), ErrNotFound)
			vs, err = s.AssistantVersions(ctx, "a1")
			require.NoError(t, err)
			require.Empty(t, vs)
			_, err = s.GetAssistant(ctx, "a1")
			require.ErrorIs(t, err, ErrNotFound)
		})
	}
}

// TestAgentRecordsOnCluster: every record operation runs on a Redis
// Cluster (each script's keys share a slot) and search finds records of
// every shard.
func TestAgentRecordsOnCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, redistest.ClusterOptions{})
	var rdb redis.UniversalClient = c.Client()
	s := New(rdb, nil)
	ctx := t.Context()
	var ids []string
	for i := range 40 {
		id := fmt.Sprintf("c%d", i)
		ids = append(ids, id)
		th, _, err := s.PutAgentThread(ctx, id, []byte(`{}`), "raise", "c")
		require.NoError(t, err)
		_, err = s.WriteAgentThread(ctx, id, th.Rev, "w", map[string]string{"metadata": `{"n":1}`})
		require.NoError(t, err)
		a, _, err := s.PutAssistant(ctx, id, map[string]string{"graph_id": `"g"`}, []byte(`{}`), "raise", "c")
		require.NoError(t, err)
		_, err = s.WriteAssistant(ctx, id, a.Rev, 0, []byte(`{}`), nil, "w")
		require.NoError(t, err)
	}
	got, err := s.AgentThreadIDs(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, ids, got)
	recs, err := s.AgentThreads(ctx, ids)
	require.NoError(t, err)
	require.Len(t, recs, 40)
	as, err := s.AssistantIDs(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, ids, as)
	// A thread's checkpoints copied into threads of other slots.
	nsKeys := s.keys.CheckpointNS("c0", "")
	require.NoError(t, rdb.HSet(ctx, s.keys.Checkpoints("c0"), "", "1").Err())
	require.NoError(t, rdb.ZAdd(ctx, nsKeys[0], redis.Z{Score: 1, Member: "1"}).Err())
	require.NoError(t, rdb.HSet(ctx, nsKeys[1], "1:d", `{"v":1}`, "1:i", `{"id":"k1"}`).Err())
	for _, id := range ids[1:] {
		n, err := s.CopyCheckpoints(ctx, "c0", id)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		cp, err := s.LatestCheckpoint(ctx, id, "")
		require.NoError(t, err)
		require.JSONEq(t, `{"v":1}`, string(cp.Data))
	}
	for _, id := range ids {
		require.NoError(t, s.DeleteAgentThread(ctx, id, "d"))
		require.NoError(t, s.DeleteAssistant(ctx, id, "d"))
	}
}

// TestCopyCheckpoints: a thread's copy has the source's checkpoints (ids,
// versions, data, parents, pending writes) in every namespace; the
// source is unchanged; a retry answers as the copy, and a copy over a
// thread that has checkpoints of its own is refused.
func TestCopyCheckpoints(t *testing.T) {
	t.Parallel()
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := t.Context()
			s := New(b.Client, nil)
			one := []NodeSpec{{ID: "a", Input: "null", Deps: []string{}, Dependents: []string{}, Descendants: []string{}, MaxAttempts: 1}}
			_, err := s.Submit(ctx, SubmitArgs{Run: "r1", Thread: "src", Multitask: "reject", Digest: "d", Nodes: one})
			require.NoError(t, err)
			c, err := s.Claim(ctx, NodeRef{Thread: "src", Run: "r1", Node: "a"}, "w", time.Minute, time.Second)
			require.NoError(t, err)
			for i, ns := range []string{"", "", "", "sub:x"} {
				_, err := s.SaveCheckpoint(ctx, c.Lease, CheckpointWrite{NS: ns, ID: fmt.Sprintf("c%d", i),
					Data: []byte(fmt.Sprintf(`{"i":%d}`, i)), Metadata: []byte(`{"step":1}`)})
				require.NoError(t, err)
			}
			_, err = s.PutWrites(ctx, c.Lease, "", "c2", "task1", []PendingWrite{{Idx: 0, Channel: "x", Value: []byte(`7`)}})
			require.NoError(t, err)

			n, err := s.CopyCheckpoints(ctx, "src", "dst")
			require.NoError(t, err)
			require.Equal(t, 2, n)
			for _, ns := range []string{"", "sub:x"} {
				want, _, err := s.Checkpoints(ctx, "src", ns, 0, 10)
				require.NoError(t, err)
				got, _, err := s.Checkpoints(ctx, "dst", ns, 0, 10)
				require.NoError(t, err)
				require.Len(t, got, len(want))
				for i := range want {
					want[i].Thread = "dst"
					require.Equal(t, want[i], got[i])
				}
			}
			cp, err := s.CheckpointByID(ctx, "dst", "", "c1")
			require.NoError(t, err)
			require.JSONEq(t, `{"i":1}`, string(cp.Data))
			ws, err := s.PendingWrites(ctx, "dst", "", "c2")
			require.NoError(t, err)
			require.Len(t, ws, 1)
			require.JSONEq(t, `7`, string(ws[0].Value))

			n, err = s.CopyCheckpoints(ctx, "src", "dst")
			require.NoError(t, err, "a retry answers as the copy")
			require.Equal(t, 2, n)
			_, err = s.SaveCheckpoint(ctx, c.Lease, CheckpointWrite{NS: "", ID: "c9", Data: []byte(`{}`)})
			require.NoError(t, err)
			_, err = s.CopyCheckpoints(ctx, "src", "dst")
			require.ErrorIs(t, err, ErrExists, "the copy holds an older copy of the namespace: refused")
		})
	}
}

// TestKeepLatestCheckpoints: pruning with keep_latest leaves each
// namespace its newest checkpoint (with its pending writes), removes the
// rest with what was stored against them, is refused while the thread's
// run is RUNNING, and never reuses a version.
func TestKeepLatestCheckpoints(t *testing.T) {
	t.Parallel()
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := t.Context()
			s := New(b.Client, nil)
			one := []NodeSpec{{ID: "a", Input: "null", Deps: []string{}, Dependents: []string{}, Descendants: []string{}, MaxAttempts: 1}}
			_, err := s.Submit(ctx, SubmitArgs{Run: "r1", Thread: "th", Multitask: "reject", Digest: "d", Nodes: one})
			require.NoError(t, err)
			c, err := s.Claim(ctx, NodeRef{Thread: "th", Run: "r1", Node: "a"}, "w", time.Minute, time.Second)
			require.NoError(t, err)
			for i, ns := range []string{"", "", "", "sub"} {
				_, err := s.SaveCheckpoint(ctx, c.Lease, CheckpointWrite{NS: ns, ID: fmt.Sprintf("c%d", i), Data: []byte(`{}`)})
				require.NoError(t, err)
			}
			for _, id := range []string{"c1", "c2"} {
				_, err = s.PutWrites(ctx, c.Lease, "", id, "t", []PendingWrite{{Idx: 0, Channel: "x", Value: []byte(`1`)}})
				require.NoError(t, err)
			}
			_, err = s.KeepLatestCheckpoints(ctx, "th")
			require.ErrorIs(t, err, ErrThreadBusy, "r1 is RUNNING")
			_, err = s.Commit(ctx, c.Lease, []byte(`1`), nil)
			require.NoError(t, err)

			n, err := s.KeepLatestCheckpoints(ctx, "th")
			require.NoError(t, err)
			require.Equal(t, 2, n, "c0 and c1 go; c2 and the sub namespace's c3 stay")
			list, _, err := s.Checkpoints(ctx, "th", "", 0, 10)
			require.NoError(t, err)
			require.Len(t, list, 1)
			require.Equal(t, "c2", list[0].ID)
			ws, err := s.PendingWrites(ctx, "th", "", "c2")
			require.NoError(t, err)
			require.Len(t, ws, 1, "the newest's pending writes stay")
			_, err = s.CheckpointByID(ctx, "th", "", "c1")
			require.ErrorIs(t, err, ErrNoCheckpoint)
			left, err := b.Client.HLen(ctx, s.keys.CheckpointNS("th", "")[3]).Result()
			require.NoError(t, err)
			require.Equal(t, int64(1), left, "c1's pending writes went with it")
			list, _, err = s.Checkpoints(ctx, "th", "sub", 0, 10)
			require.NoError(t, err)
			require.Len(t, list, 1)
			n, err = s.KeepLatestCheckpoints(ctx, "th")
			require.NoError(t, err)
			require.Zero(t, n, "a retry removes nothing more")
		})
	}
}
