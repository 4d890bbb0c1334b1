package fence

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/scripts/lua"
)

// packScript packs KEYS[1] (run hash), KEYS[3..] (node hashes) and KEYS[2]
// (event stream) with lib/pack.lua and returns the string.
func packScript(t *testing.T) *redis.Script {
	t.Helper()
	src, err := lua.FS.ReadFile("lib/pack.lua")
	require.NoError(t, err)
	return redis.NewScript("local rcall = redis.call\n" + string(src) +
		"\nreturn packRun(KEYS[1], {unpack(KEYS, 3)}, KEYS[2])")
}

// packAndCompare packs a run's keys and checks that every hash field and
// every event comes back as stored; it returns the packed size.
func packAndCompare(t *testing.T, ctx context.Context, rdb redis.UniversalClient, keys Keys, thread, run string) int {
	t.Helper()
	raw, err := rdb.HGet(ctx, keys.Run(thread, run), "nodes").Result()
	require.NoError(t, err)
	var ids []string
	require.NoError(t, json.Unmarshal([]byte(raw), &ids))
	ks := []string{keys.Run(thread, run), keys.Events(thread, run)}
	for _, id := range ids {
		ks = append(ks, keys.Node(thread, run, id))
	}
	packed, err := packScript(t).Run(ctx, rdb, ks).Text()
	require.NoError(t, err)
	got, err := unpackRun([]byte(packed))
	require.NoError(t, err)

	want, err := rdb.HGetAll(ctx, ks[0]).Result()
	require.NoError(t, err)
	assert.Equal(t, want, got.Run, "run hash")
	require.Len(t, got.Nodes, len(ids))
	for i, id := range ids {
		want, err := rdb.HGetAll(ctx, keys.Node(thread, run, id)).Result()
		require.NoError(t, err)
		assert.Equal(t, want, got.Nodes[i], "node %s", id)
	}
	events, err := rdb.XRange(ctx, ks[1], "-", "+").Result()
	require.NoError(t, err)
	if len(events) == 0 {
		assert.Empty(t, got.Events, "events")
	} else {
		assert.Equal(t, events, got.Events, "events")
	}

	// The retention sweep packs in Go (pack.go) what it read: the same
	// values read back, but what a SUCCEEDED run is slimmed of.
	var nodeCmds []*redis.MapStringStringCmd
	for _, id := range ids {
		nodeCmds = append(nodeCmds, rdb.HGetAll(ctx, keys.Node(thread, run, id)))
	}
	runHash, err := rdb.HGetAll(ctx, ks[0]).Result()
	require.NoError(t, err)
	goPacked, seen := packRead(runHash, nodeCmds, rdb.Do(ctx, "XRANGE", ks[1], "-", "+"))
	require.NotEmpty(t, seen)
	fromGo, err := unpackRun(goPacked)
	require.NoError(t, err)
	runDrop, nodeDrop := map[string]bool{}, map[string]bool{}
	if runHash["status"] == "SUCCEEDED" {
		runDrop, nodeDrop = slimRun, slimNode
	}
	without := func(h map[string]string, drop map[string]bool) map[string]string {
		out := map[string]string{}
		for k, v := range h {
			if !drop[k] {
				out[k] = v
			}
		}
		return out
	}
	assert.Equal(t, without(got.Run, runDrop), fromGo.Run, "run hash, packed in Go")
	require.Len(t, fromGo.Nodes, len(ids))
	for i := range ids {
		assert.Equal(t, without(got.Nodes[i], nodeDrop), fromGo.Nodes[i], "node %s, packed in Go", ids[i])
	}
	assert.Equal(t, got.Events, fromGo.Events, "events, packed in Go")
	if runHash["status"] != "SUCCEEDED" {
		assert.InDelta(t, len(packed), len(goPacked), float64(len(packed))/50+2, "Go packs as small as Lua")
	}
	t.Logf("%s: %d nodes, %d events, packed into %d bytes (%d in Go)", run, len(ids), len(events), len(packed), len(goPacked))
	return len(packed)
}

// A run packed into one string reads back exactly as its keys held it:
// every field of the run and node hashes and every event (its id and
// fields), for runs that succeeded, failed after retries with an error
// text of any bytes, and were cancelled, and for values that look like
// numbers, times and hex ids without being them. A one-node run packs
// into under 250 bytes (its three keys hold about 1,700 B of Redis
// memory). On miniredis and a real redis-server.
func TestPackedRunReadsBackAsStored(t *testing.T) {
	t.Parallel()
	for _, be := range redistest.Backends(t) {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			s := New(be.Client, nil)
			spec := func(run string, ids ...string) SubmitArgs {
				var nodes []NodeSpec
				for _, id := range ids {
					nodes = append(nodes, NodeSpec{ID: id, Kind: "noop", Queue: "default", Input: "null",
						Deps: []string{}, Dependents: []string{}, Descendants: []string{}, MaxAttempts: 2})
				}
				return SubmitArgs{Run: run, Digest: strings.Repeat("ab12", 16), Nodes: nodes}
			}
			ref := func(run, node string) NodeRef { return NodeRef{Thread: run, Run: run, Node: node} }

			_, err := s.Submit(ctx, spec("one", "n0"))
			require.NoError(t, err)
			c, err := s.Claim(ctx, ref("one", "n0"), "bench-worker", time.Minute, time.Second)
			require.NoError(t, err)
			_, err = s.Commit(ctx, c.Lease, []byte(`{}`), nil)
			require.NoError(t, err)
			size := packAndCompare(t, ctx, be.Client, s.keys, "one", "one")
			assert.Less(t, size, 200, "a one-node run packs small")

			_, err = s.Submit(ctx, spec("mixed", "a", "b", "c"))
			require.NoError(t, err)
			for range 2 {
				c, err := s.Claim(ctx, ref("mixed", "a"), "w-1", time.Minute, time.Second)
				require.NoError(t, err)
				_, err = s.Fail(ctx, c.Lease, Failure{Err: "boom\nline two: ünïcödé \x00\x7f\xff, 0123, deadbeef"}, nil)
				require.NoError(t, err)
			}
			c, err = s.Claim(ctx, ref("mixed", "b"), "0123456789abcdef", time.Minute, time.Second)
			require.NoError(t, err)
			_, err = s.Commit(ctx, c.Lease, []byte(`{"big":"`+strings.Repeat("x", 300)+`","n":-0,"t":1796378734106}`), nil)
			require.NoError(t, err)
			_, err = s.Cancel(ctx, "mixed", "enough", "tester")
			require.NoError(t, err)
			packAndCompare(t, ctx, be.Client, s.keys, "mixed", "mixed")

			// Values at the edges of each encoding, in a hash of their own.
			odd := []string{"", "0", "-0", "00", "007", "-1", "-17", "1e5", "1.5", " 1", "999999999999999",
				"9999999999999999", "1000000000000", "999999999999", "-1796378734106", "deadbeef", "DEADBEEF",
				"deadbee", "0123456789", "abcdef0123456789", strings.Repeat("f", 300), strings.Repeat("é", 100)}
			runKey := s.keys.Run("odd", "odd")
			var fields []any
			for i, v := range odd {
				fields = append(fields, "f"+string(rune('a'+i)), v, v+"-as-name", "x")
			}
			require.NoError(t, be.Client.HSet(ctx, runKey, "created_at", "1796378734102", "nodes", `[]`).Err())
			require.NoError(t, be.Client.HSet(ctx, runKey, fields...).Err())
			packAndCompare(t, ctx, be.Client, s.keys, "odd", "odd")
		})
	}
}

// A string that is not a packed run is refused, never read as one.
func TestUnpackRefusesMalformedInput(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"", "\x02", "\x01", "\x01\x00\x05", "\x01\x00\x01\x09", "\x01\x00\x00\x00\x00x",
		"\x01\x00\x01\xf8\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"} {
		_, err := unpackRun([]byte(in))
		assert.ErrorIs(t, err, errPacked, "%q", in)
	}
}

// packInPlace stands in for compaction: it packs a finished run's keys
// into its packed key, with the run hash's time to live, and deletes them.
func packInPlace(t *testing.T, ctx context.Context, rdb redis.UniversalClient, keys Keys, thread, run string) {
	t.Helper()
	raw, err := rdb.HGet(ctx, keys.Run(thread, run), "nodes").Result()
	require.NoError(t, err)
	var ids []string
	require.NoError(t, json.Unmarshal([]byte(raw), &ids))
	ks := []string{keys.Run(thread, run), keys.Events(thread, run), keys.Packed(thread, run)}
	for _, id := range ids {
		ks = append(ks, keys.Node(thread, run, id))
	}
	src, err := lua.FS.ReadFile("lib/pack.lua")
	require.NoError(t, err)
	n, err := redis.NewScript("local rcall = redis.call\n"+string(src)+`
local packed = packRun(KEYS[1], {unpack(KEYS, 4)}, KEYS[2])
rcall('DEL', KEYS[1], KEYS[2])
for i = 4, #KEYS do rcall('DEL', KEYS[i]) end
rcall('SET', KEYS[3], packed)
return #packed`).Run(ctx, rdb, ks).Int64()
	require.NoError(t, err)
	require.Positive(t, n)
}

// What a reader sees of a finished run is the same once the run is
// packed into one key: its status, nodes and summary, its events (all,
// after an id, a page of them, and what a follower is handed), and a
// node's input; a run without a thread is still found by its id. For
// runs that succeeded, failed and were cancelled, with and without a
// thread. On miniredis and a real redis-server.
func TestPackedRunReadsTheSame(t *testing.T) {
	t.Parallel()
	for _, be := range redistest.Backends(t) {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			s := New(be.Client, nil)
			submit := func(run, thread string, ids ...string) {
				var nodes []NodeSpec
				for _, id := range ids {
					nodes = append(nodes, NodeSpec{ID: id, Kind: "noop", Queue: "default", Input: `{"id":"` + id + `"}`,
						Deps: []string{}, Dependents: []string{}, Descendants: []string{}, MaxAttempts: 1})
				}
				_, err := s.Submit(ctx, SubmitArgs{Run: run, Thread: thread, Digest: "d", Nodes: nodes})
				require.NoError(t, err)
			}
			end := func(thread, run, node string, ok bool) {
				c, err := s.Claim(ctx, NodeRef{Thread: thread, Run: run, Node: node}, "w-1", time.Minute, time.Second)
				require.NoError(t, err)
				if ok {
					_, err = s.Commit(ctx, c.Lease, []byte(`{"ok":true}`), nil)
				} else {
					_, err = s.Fail(ctx, c.Lease, Failure{Err: "boom", Final: true}, nil)
				}
				require.NoError(t, err)
			}
			submit("ok", "", "n0")
			end("ok", "ok", "n0", true)
			submit("bad", "", "a", "b")
			end("bad", "bad", "a", false)
			end("bad", "bad", "b", true)
			submit("stop", "", "a", "b")
			end("stop", "stop", "a", true)
			_, err := s.Cancel(ctx, "stop", "enough", "tester")
			require.NoError(t, err)
			submit("turn", "chat", "n0")
			end("chat", "turn", "n0", true)

			type view struct {
				Run     *RunInfo
				Status  string
				Sum     []RunSummary
				All     []Event
				After   []Event
				Page    []Event
				Follow  []Event
				Input   json.RawMessage
				Missing error
			}
			read := func(run string) view {
				var v view
				var err error
				v.Run, err = s.GetRun(ctx, run)
				require.NoError(t, err)
				v.Status, err = s.RunStatus(ctx, run)
				require.NoError(t, err)
				v.Sum, err = s.Summaries(ctx, []string{run, "nope"})
				require.NoError(t, err)
				v.All, err = s.Events(ctx, run, "", 0)
				require.NoError(t, err)
				require.GreaterOrEqual(t, len(v.All), 4)
				v.After, err = s.Events(ctx, run, v.All[1].ID, 0)
				require.NoError(t, err)
				v.Page, err = s.Events(ctx, run, v.All[0].ID, 2)
				require.NoError(t, err)
				v.Follow, err = s.WaitEvents(ctx, run, v.All[2].ID, 10, 50*time.Millisecond)
				require.NoError(t, err)
				v.Input, err = s.NodeInput(ctx, run, v.Run.Nodes[0].ID)
				require.NoError(t, err)
				_, v.Missing = s.NodeInput(ctx, run, "nope")
				return v
			}
			for _, r := range []struct{ thread, run string }{{"ok", "ok"}, {"bad", "bad"}, {"stop", "stop"}, {"chat", "turn"}} {
				before := read(r.run)
				packInPlace(t, ctx, be.Client, s.keys, r.thread, r.run)
				n, err := be.Client.Exists(ctx, s.keys.Run(r.thread, r.run), s.keys.Events(r.thread, r.run)).Result()
				require.NoError(t, err)
				require.Zero(t, n, "%s: packed in place of its keys", r.run)
				after := read(r.run)
				assert.Equal(t, before, after, r.run)
				assert.ErrorIs(t, after.Missing, ErrNotFound)
				thread, err := s.Locate(ctx, r.run)
				require.NoError(t, err)
				assert.Equal(t, r.thread, thread)
			}
		})
	}
}

// A packed run keeps its id as its keys did: the same submission again
// answers with the stored run and creates nothing, another spec under the
// id is refused, a run of a thread cannot take the id of a packed run
// without one, and a delete removes it whole (its id is free again). With
// and without a thread; on miniredis and a real redis-server.
func TestPackedRunKeepsItsID(t *testing.T) {
	t.Parallel()
	for _, be := range redistest.Backends(t) {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			s := New(be.Client, nil)
			args := func(run, thread, digest string) SubmitArgs {
				return SubmitArgs{Run: run, Thread: thread, Digest: digest, Nodes: []NodeSpec{{ID: "n0", Kind: "noop",
					Queue: "default", Input: "null", Deps: []string{}, Dependents: []string{}, Descendants: []string{}, MaxAttempts: 1}}}
			}
			for _, r := range []struct{ thread, run string }{{"", "solo"}, {"chat", "turn"}} {
				first, err := s.Submit(ctx, args(r.run, r.thread, "d1"))
				require.NoError(t, err)
				c, err := s.Claim(ctx, NodeRef{Thread: first.Thread, Run: r.run, Node: "n0"}, "w-1", time.Minute, time.Second)
				require.NoError(t, err)
				_, err = s.Commit(ctx, c.Lease, []byte(`1`), nil)
				require.NoError(t, err)
				packInPlace(t, ctx, be.Client, s.keys, first.Thread, r.run)

				again, err := s.Submit(ctx, args(r.run, r.thread, "d1"))
				require.NoError(t, err, r.run)
				assert.False(t, again.Created, "%s: the same submission finds the packed run", r.run)
				assert.Equal(t, "SUCCEEDED", again.Status)
				assert.Equal(t, first.Incarnation, again.Incarnation)
				assert.Empty(t, again.Ready)
				_, err = s.Submit(ctx, args(r.run, r.thread, "d2"))
				assert.ErrorIs(t, err, ErrRunConflict, "%s: another spec under a packed run's id", r.run)
				if r.thread == "" {
					_, err = s.Submit(ctx, args(r.run, "other", "d1"))
					assert.ErrorIs(t, err, ErrRunConflict, "a run of a thread cannot take a packed run's id")
				}
				info, err := s.GetRun(ctx, r.run)
				require.NoError(t, err)
				assert.Equal(t, "SUCCEEDED", info.Status, "%s: refused submissions change nothing", r.run)

				status, err := s.DeleteRun(ctx, r.run)
				require.NoError(t, err)
				assert.Equal(t, "SUCCEEDED", status)
				_, err = s.GetRun(ctx, r.run)
				assert.ErrorIs(t, err, ErrNotFound, "%s: deleted whole", r.run)
				n, err := be.Client.Exists(ctx, s.keys.Packed(first.Thread, r.run)).Result()
				require.NoError(t, err)
				assert.Zero(t, n)
				again, err = s.Submit(ctx, args(r.run, r.thread, "d2"))
				require.NoError(t, err)
				assert.True(t, again.Created, "%s: a deleted packed run's id is free", r.run)
			}
		})
	}
}

// The retention sweep packs a run in Go from what it read, and retain.lua
// stores that only while the run is still as read: an event recorded in
// between (a late writer's refusal) makes the script pack the run itself,
// so the packed run holds it. On miniredis and a real redis-server.
func TestRetentionPacksWhatIsStoredNow(t *testing.T) {
	t.Parallel()
	for _, be := range redistest.Backends(t) {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			s := New(be.Client, nil)
			n := NodeSpec{ID: "a", Kind: "noop", Queue: "default", Input: "null",
				Deps: []string{}, Dependents: []string{}, Descendants: []string{}, MaxAttempts: 2}
			for _, run := range []string{"asread", "changed"} {
				_, err := s.Submit(ctx, SubmitArgs{Run: run, Digest: "d", Nodes: []NodeSpec{n}})
				require.NoError(t, err)
				c, err := s.Claim(ctx, NodeRef{Thread: run, Run: run, Node: "a"}, "w", time.Minute, time.Second)
				require.NoError(t, err)
				_, err = s.Commit(ctx, c.Lease, []byte(`1`), nil)
				require.NoError(t, err)

				k := s.keys
				runHash, err := be.Client.HGetAll(ctx, k.Run(run, run)).Result()
				require.NoError(t, err)
				nodes := []*redis.MapStringStringCmd{be.Client.HGetAll(ctx, k.Node(run, run, "a"))}
				packed, seen := packRead(runHash, nodes, be.Client.Do(ctx, "XRANGE", k.Events(run, run), "-", "+"))
				require.NotEmpty(t, packed)
				if run == "changed" {
					require.NoError(t, be.Client.XAdd(ctx, &redis.XAddArgs{Stream: k.Events(run, run),
						Values: []any{"type", "stale_rejected", "node", "a", "epoch", "1", "worker", "late", "at", "1"}}).Err())
				}
				keys := []string{k.Finished(ShardOf(run)), k.Run(run, run), k.Events(run, run), k.Packed(run, run),
					k.Node(run, run, "a"), k.Locator(run)}
				code, err := s.scripts["retain"].Run(ctx, be.Client, keys, 60000, Ref(run, run, ""), "", 1, packed, seen).Int()
				require.NoError(t, err)
				require.Equal(t, 1, code)
				stored, err := be.Client.Get(ctx, k.Packed(run, run)).Bytes()
				require.NoError(t, err)
				got, err := unpackRun(stored)
				require.NoError(t, err)
				if run == "asread" {
					require.Equal(t, packed, stored, "the run as read is stored as packed in Go")
					require.Len(t, got.Events, 4)
				} else {
					require.Len(t, got.Events, 5, "the event recorded after the read is kept")
					require.Equal(t, "stale_rejected", got.Events[4].Values["type"])
				}
			}
		})
	}
}

// The retention slims a SUCCEEDED run the same whether it packs the run in
// Go (pack.go's lists) or retain.lua packs it (lib/retain_run.lua's): the
// two keep the same fields of the run hash and of the node hash.
func TestRetentionSlimsAlikeInGoAndLua(t *testing.T) {
	t.Parallel()
	for _, be := range redistest.Backends(t) {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			s := New(be.Client, nil)
			n := NodeSpec{ID: "a", Kind: "noop", Queue: "default", Input: "null",
				Deps: []string{}, Dependents: []string{}, Descendants: []string{}, MaxAttempts: 2}
			names := map[string][2][]string{}
			for _, run := range []string{"ingo", "inlua"} {
				_, err := s.Submit(ctx, SubmitArgs{Run: run, Digest: "d", Nodes: []NodeSpec{n}})
				require.NoError(t, err)
				c, err := s.Claim(ctx, NodeRef{Thread: run, Run: run, Node: "a"}, "w", time.Minute, time.Second)
				require.NoError(t, err)
				_, err = s.Commit(ctx, c.Lease, []byte(`1`), nil)
				require.NoError(t, err)
				k := s.keys
				var packed []byte
				var seen string
				if run == "ingo" {
					runHash, err := be.Client.HGetAll(ctx, k.Run(run, run)).Result()
					require.NoError(t, err)
					nodes := []*redis.MapStringStringCmd{be.Client.HGetAll(ctx, k.Node(run, run, "a"))}
					packed, seen = packRead(runHash, nodes, be.Client.Do(ctx, "XRANGE", k.Events(run, run), "-", "+"))
					require.NotEmpty(t, packed)
				}
				keys := []string{k.Finished(ShardOf(run)), k.Run(run, run), k.Events(run, run), k.Packed(run, run),
					k.Node(run, run, "a"), k.Locator(run)}
				code, err := s.scripts["retain"].Run(ctx, be.Client, keys, 60000, Ref(run, run, ""), "", 1, packed, seen).Int()
				require.NoError(t, err)
				require.Equal(t, 1, code)
				stored, err := be.Client.Get(ctx, k.Packed(run, run)).Bytes()
				require.NoError(t, err)
				got, err := unpackRun(stored)
				require.NoError(t, err)
				require.Len(t, got.Nodes, 1)
				names[run] = [2][]string{slices.Sorted(maps.Keys(got.Run)), slices.Sorted(maps.Keys(got.Nodes[0]))}
			}
			require.Equal(t, names["inlua"][0], names["ingo"][0], "run hash fields kept")
			require.Equal(t, names["inlua"][1], names["ingo"][1], "node hash fields kept")
		})
	}
}
