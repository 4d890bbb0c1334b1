package fence_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
)

func chunk(event, data string) fence.StreamChunk {
	return fence.StreamChunk{Event: event, Data: json.RawMessage(data)}
}

// readAll reads run's whole stream.
func (tb *testBundle) readAll(t *testing.T, run string) []fence.StreamEntry {
	t.Helper()
	es, err := tb.store.ReadStream(tb.ctx, run, "", 0, 0)
	require.NoError(t, err)
	return es
}

// events of entries, "event:data" each.
func entryTexts(es []fence.StreamEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Event + ":" + string(e.Data)
	}
	return out
}

// An attempt's chunks reach the run's stream after a metadata entry that
// marks its start. Once the node was taken over, the paused attempt's
// chunks are refused (fenced, recorded as stale_rejected op=stream), and
// a reader sees none of them after the takeover's metadata.
func TestStreamStaleAttemptRefusedAfterTakeover(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.submit(t, spec("st", node("n")))
		old := tb.claim(t, "st", "n", "w1", shortTTL)
		ids, err := tb.store.AppendStream(tb.ctx, old.Lease, 0, []fence.StreamChunk{chunk("messages", `[{"content":"Hel"}, {}]`)})
		require.NoError(t, err)
		require.Len(t, ids, 1)

		tb.advance(t, pastExpiry)
		fresh := tb.claim(t, "st", "n", "w2", longTTL)
		require.Equal(t, old.Epoch+1, fresh.Epoch)

		_, err = tb.store.AppendStream(tb.ctx, old.Lease, 1, []fence.StreamChunk{chunk("messages", `[{"content":"lo (paused)"},{}]`)})
		require.ErrorIs(t, err, fence.ErrStaleEpoch)
		require.True(t, fence.IsFenced(err))
		rejected := ofType(tb.events(t, "st"), "stale_rejected")
		require.Len(t, rejected, 1)
		require.Equal(t, "stream", rejected[0].Details["op"])
		require.Equal(t, old.Epoch, rejected[0].Epoch)

		_, err = tb.store.AppendStream(tb.ctx, fresh.Lease, 0, []fence.StreamChunk{chunk("messages", `[{"content":"Hello"},{}]`), chunk("values", `{"x":1}`)})
		require.NoError(t, err)
		es := tb.readAll(t, "st")
		require.Equal(t, []string{
			`metadata:{"attempt":1,"run_id":"st"}`, `messages:[{"content":"Hel"},{}]`,
			`metadata:{"attempt":2,"run_id":"st"}`, `messages:[{"content":"Hello"},{}]`, `values:{"x":1}`,
		}, normalizeMeta(t, es))
		require.Equal(t, int64(1), es[1].Attempt)
		require.Equal(t, int64(2), es[4].Attempt)
		require.Equal(t, "n", es[4].Node)
		require.Equal(t, ids[0], es[1].ID)

		// A claim that ended (committed) streams nothing more either.
		tb.commit(t, fresh, `1`)
		_, err = tb.store.AppendStream(tb.ctx, fresh.Lease, 2, []fence.StreamChunk{chunk("values", `{}`)})
		require.ErrorIs(t, err, fence.ErrNotRunning)
		require.Len(t, tb.readAll(t, "st"), 5)
	})
}

// normalizeMeta is entryTexts with each metadata entry's JSON keys in a
// fixed order (Lua's cjson writes them in any order).
func normalizeMeta(t *testing.T, es []fence.StreamEntry) []string {
	t.Helper()
	out := entryTexts(es)
	for i, e := range es {
		if e.Event == fence.MetadataEvent {
			var m map[string]any
			require.NoError(t, json.Unmarshal(e.Data, &m))
			b, _ := json.Marshal(m)
			out[i] = e.Event + ":" + string(b)
		}
	}
	return out
}

// A batch whose reply was lost is sent again with the same seq: it answers
// with the ids of the first time and appends nothing, even after the node
// was taken over. An older batch is refused with ErrStreamSeq.
func TestStreamLostReplyReplay(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.submit(t, spec("rp", node("n")))
		c := tb.claim(t, "rp", "n", "w1", shortTTL)
		batch := []fence.StreamChunk{chunk("updates", `{"a":1}`), chunk("updates", `{"b":2}`)}
		first, err := tb.store.AppendStream(tb.ctx, c.Lease, 0, batch)
		require.NoError(t, err)
		again, err := tb.store.AppendStream(tb.ctx, c.Lease, 0, batch)
		require.NoError(t, err)
		require.Equal(t, first, again)
		require.Len(t, tb.readAll(t, "rp"), 3, "metadata and two chunks, once")

		next, err := tb.store.AppendStream(tb.ctx, c.Lease, 2, []fence.StreamChunk{chunk("custom", `"x"`)})
		require.NoError(t, err)
		_, err = tb.store.AppendStream(tb.ctx, c.Lease, 0, batch)
		require.ErrorIs(t, err, fence.ErrStreamSeq, "not the claim's last batch")
		require.True(t, fence.IsRefused(err))

		tb.advance(t, pastExpiry)
		tb.claim(t, "rp", "n", "w2", longTTL)
		replayed, err := tb.store.AppendStream(tb.ctx, c.Lease, 2, []fence.StreamChunk{chunk("custom", `"x"`)})
		require.NoError(t, err, "the replay is recognised before the fence")
		require.Equal(t, next, replayed)
		require.Len(t, tb.readAll(t, "rp"), 4)
		require.Empty(t, ofType(tb.events(t, "rp"), "stale_rejected"))
	})
}

// A chunk over the cap, or not JSON, is refused and nothing of its batch
// is appended; the stream keeps about its cap of entries; a lease of
// another submission of the run id is stale.
func TestStreamBounds(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		s := fence.New(tb.be.Client, &fence.Options{StreamMaxLen: 10, MaxStreamChunkBytes: 64})
		tb.submit(t, spec("bd", node("n")))
		c := tb.claim(t, "bd", "n", "w1", longTTL)
		_, err := s.AppendStream(tb.ctx, c.Lease, 0, []fence.StreamChunk{chunk("values", `{}`), chunk("values", `"`+strings.Repeat("x", 64)+`"`)})
		require.ErrorIs(t, err, fence.ErrTooLarge)
		require.Contains(t, err.Error(), "chunk 1")
		_, err = s.AppendStream(tb.ctx, c.Lease, 0, []fence.StreamChunk{chunk("values", `{`)})
		require.ErrorIs(t, err, fence.ErrInvalidData)
		_, err = s.AppendStream(tb.ctx, c.Lease, 0, []fence.StreamChunk{chunk("bad event", `{}`)})
		require.ErrorIs(t, err, fence.ErrInvalidData)
		require.Empty(t, tb.readAll(t, "bd"))

		// The script's own cap, for callers in other languages.
		big := fence.New(tb.be.Client, &fence.Options{StreamMaxLen: 10})
		_, err = big.AppendStream(tb.ctx, c.Lease, 0, []fence.StreamChunk{chunk("values", `"`+strings.Repeat("x", 64)+`"`)})
		require.NoError(t, err)
		_, err = s.AppendStream(tb.ctx, c.Lease, 1, []fence.StreamChunk{chunk("values", `"`+strings.Repeat("y", 100)+`"`)})
		require.ErrorIs(t, err, fence.ErrTooLarge)

		// Data is stored on one line, whatever its spacing.
		_, err = s.AppendStream(tb.ctx, c.Lease, 1, []fence.StreamChunk{chunk("values", "{\n  \"a\": [1,\n 2]\n}")})
		require.NoError(t, err)
		es := tb.readAll(t, "bd")
		require.Equal(t, `{"a":[1,2]}`, string(es[len(es)-1].Data))

		for i := range 300 {
			_, err = s.AppendStream(tb.ctx, c.Lease, int64(2+i), []fence.StreamChunk{chunk("messages", `"t"`)})
			require.NoError(t, err)
		}
		n, err := tb.be.Client.XLen(tb.ctx, s.Keys().Stream("bd", "bd")).Result()
		require.NoError(t, err)
		require.LessOrEqual(t, n, int64(10+100), "MAXLEN ~ trims whole nodes of 100 entries")

		other := c.Lease
		other.Incarnation = "another"
		_, err = s.AppendStream(tb.ctx, other, 400, []fence.StreamChunk{chunk("values", `{}`)})
		require.ErrorIs(t, err, fence.ErrStaleEpoch)
	})
}

// The run's stream lives as long as the run: retention gives it the run's
// time to live, and deleting the run deletes it.
func TestStreamRetention(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		keys := tb.store.Keys()
		for _, run := range []string{"kept", "gone"} {
			tb.submit(t, spec(run, node("n")))
			c := tb.claim(t, run, "n", "w", longTTL)
			_, err := tb.store.AppendStream(tb.ctx, c.Lease, 0, []fence.StreamChunk{chunk("values", `{}`)})
			require.NoError(t, err)
			tb.commit(t, c, `1`)
		}
		_, err := tb.store.DeleteRun(tb.ctx, "gone")
		require.NoError(t, err)
		n, err := tb.be.Client.Exists(tb.ctx, keys.Stream("gone", "gone"), keys.StreamState("gone", "gone")).Result()
		require.NoError(t, err)
		require.Zero(t, n, "deleted with the run")

		retained, err := tb.store.RetainFinished(tb.ctx, time.Hour, 10)
		require.NoError(t, err)
		require.Equal(t, 1, retained)
		for _, k := range []string{keys.Stream("kept", "kept"), keys.StreamState("kept", "kept")} {
			ttl, err := tb.be.Client.PTTL(tb.ctx, k).Result()
			require.NoError(t, err)
			require.Greater(t, ttl, 59*time.Minute, "%s has the run's time to live", k)
		}
		es := tb.readAll(t, "kept")
		require.Len(t, es, 2, "readable while the (packed) run is")
	})
}

// A blocking read returns as soon as a chunk is appended.
func TestStreamReadBlocks(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.submit(t, spec("bl", node("n")))
		c := tb.claim(t, "bl", "n", "w", longTTL)
		_, err := tb.store.AppendStream(tb.ctx, c.Lease, 0, []fence.StreamChunk{chunk("values", `1`)})
		require.NoError(t, err)
		es := tb.readAll(t, "bl")
		last := es[len(es)-1].ID
		got := make(chan []fence.StreamEntry, 1)
		go func() {
			es, err := tb.store.ReadStream(tb.ctx, "bl", last, 10, 10*time.Second)
			if err != nil {
				es = nil
			}
			got <- es
		}()
		// The read may start before or after this append; either way it
		// returns the chunk after last.
		_, err = tb.store.AppendStream(tb.ctx, c.Lease, 1, []fence.StreamChunk{chunk("values", `2`)})
		require.NoError(t, err)
		select {
		case es := <-got:
			require.Equal(t, []string{"values:2"}, entryTexts(es))
		case <-time.After(9 * time.Second):
			t.Fatal("the blocking read did not return the appended chunk")
		}
		_, err = tb.store.ReadStream(tb.ctx, "nope", "", 10, 0)
		require.ErrorIs(t, err, fence.ErrNotFound)
		_, err = tb.store.ReadStream(tb.ctx, "bl", "x-1", 10, 0)
		require.ErrorIs(t, err, fence.ErrInvalidID)
	})
}

// TestStreamOnCluster: on a real 3-master Redis Cluster, runs of threads
// in different shards append (every key of the script in the thread's
// slot), a follower's XREAD of the stream and the events together is
// served, and the run's retention reaches its stream.
func TestStreamOnCluster(t *testing.T) {
	rc := redistest.StartCluster(t, redistest.ClusterOptions{})
	rdb := rc.Client()
	s := fence.New(rdb, nil)
	ctx := t.Context()
	for i := range 4 {
		run, thread := fmt.Sprintf("cr-%d", i), fmt.Sprintf("ct.%d", i)
		a := spec(run, node("n"))
		a.Thread = thread
		_, err := s.Submit(ctx, a)
		require.NoError(t, err)
		c, err := s.Claim(ctx, fence.NodeRef{Thread: thread, Run: run, Node: "n"}, "w", longTTL, grace)
		require.NoError(t, err)
		ids, err := s.AppendStream(ctx, c.Lease, 0, []fence.StreamChunk{chunk("values", `{"i":1}`)})
		require.NoError(t, err)
		again, err := s.AppendStream(ctx, c.Lease, 0, []fence.StreamChunk{chunk("values", `{"i":1}`)})
		require.NoError(t, err)
		require.Equal(t, ids, again)

		es, evs, cur, err := s.WaitStream(ctx, fence.StreamCursor{Thread: thread, Run: run, Stream: "0", Event: "0"}, 100, time.Second)
		require.NoError(t, err)
		require.Len(t, es, 2, "metadata and the chunk")
		require.NotEmpty(t, evs)
		require.Equal(t, ids[0], cur.Stream)

		_, err = s.Commit(ctx, c.Lease, []byte(`1`), nil)
		require.NoError(t, err)
		_, err = s.AppendStream(ctx, c.Lease, 1, []fence.StreamChunk{chunk("values", `{}`)})
		require.ErrorIs(t, err, fence.ErrNotRunning)
	}
	n, err := s.RetainFinished(ctx, time.Hour, 10)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	ttl, err := rdb.PTTL(ctx, s.Keys().Stream("ct.0", "cr-0")).Result()
	require.NoError(t, err)
	require.Greater(t, ttl, 59*time.Minute)
	es, err := s.ReadStream(ctx, "cr-0", "-1", 0, 0)
	require.NoError(t, err)
	require.Len(t, es, 2)
}
