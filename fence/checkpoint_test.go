package fence_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// save saves data as a checkpoint of c's thread in ns under id.
func (tb *testBundle) save(t *testing.T, c *fence.Claimed, ns, id, data string) (fence.Checkpoint, error) {
	t.Helper()
	return tb.store.SaveCheckpoint(tb.ctx, c.Lease, fence.CheckpointWrite{NS: ns, ID: id, Data: json.RawMessage(data)})
}

// Saved checkpoints read back newest first, by id and page by page; the
// version is the store's, strictly increasing; only the newest N are kept.
func TestCheckpointSaveAndRead(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		store := fence.New(tb.be.Client, &fence.Options{CheckpointHistory: 3})
		tb.submit(t, spec("cp", node("n")))
		c := tb.claim(t, "cp", "n", "w", longTTL)
		for i := 1; i <= 5; i++ {
			got, err := store.SaveCheckpoint(tb.ctx, c.Lease, fence.CheckpointWrite{NS: "agent", ID: fmt.Sprintf("c%d", i),
				Parent: fmt.Sprintf("c%d", i-1), Data: json.RawMessage(fmt.Sprintf(`{"step":%d}`, i)),
				Metadata: json.RawMessage(`{"source":"loop"}`)})
			require.NoError(t, err)
			require.Equal(t, int64(i), got.Version)
		}
		latest, err := store.LatestCheckpoint(tb.ctx, "cp", "agent")
		require.NoError(t, err)
		require.Equal(t, int64(5), latest.Version)
		require.Equal(t, "c5", latest.ID)
		require.Equal(t, "c4", latest.Parent)
		require.JSONEq(t, `{"step":5}`, string(latest.Data))
		require.JSONEq(t, `{"source":"loop"}`, string(latest.Metadata))
		require.Equal(t, "cp", latest.Run)
		require.Equal(t, "n", latest.Node)
		require.Equal(t, c.Epoch, latest.Epoch)
		require.WithinDuration(t, tb.redisNow(t), latest.At, 5*time.Second)

		page, next, err := store.Checkpoints(tb.ctx, "cp", "agent", 0, 2)
		require.NoError(t, err)
		require.Equal(t, []int64{5, 4}, versions(page))
		page, next, err = store.Checkpoints(tb.ctx, "cp", "agent", next, 2)
		require.NoError(t, err)
		require.Equal(t, []int64{3}, versions(page), "only the newest 3 are kept")
		require.Zero(t, next)

		byID, err := store.CheckpointByID(tb.ctx, "cp", "agent", "c4")
		require.NoError(t, err)
		require.JSONEq(t, `{"step":4}`, string(byID.Data))
		_, err = store.CheckpointByID(tb.ctx, "cp", "agent", "c1")
		require.ErrorIs(t, err, fence.ErrNoCheckpoint, "trimmed with its id")
		_, err = store.LatestCheckpoint(tb.ctx, "cp", "other")
		require.ErrorIs(t, err, fence.ErrNoCheckpoint)

		nss, err := store.CheckpointNamespaces(tb.ctx, "cp")
		require.NoError(t, err)
		require.Equal(t, map[string]int64{"agent": 5}, nss)
		require.Len(t, ofType(tb.events(t, "cp"), "checkpointed"), 5)

		// The same id again from the same claim (a retry after a lost
		// reply) is the same checkpoint.
		again, err := store.SaveCheckpoint(tb.ctx, c.Lease, fence.CheckpointWrite{NS: "agent", ID: "c5",
			Data: json.RawMessage(`{"step":5}`)})
		require.NoError(t, err)
		require.Equal(t, int64(5), again.Version)
		require.Len(t, ofType(tb.events(t, "cp"), "checkpointed"), 5)

		if tb.real() {
			ttl, err := tb.be.Client.PTTL(tb.ctx, tb.store.Keys().CheckpointNS("cp", "agent")[1]).Result()
			require.NoError(t, err)
			require.Greater(t, ttl, fence.DefaultThreadRetention-time.Minute, "checkpoints expire a retention after the last write")
		}
	})
}

func versions(list []fence.Checkpoint) []int64 {
	out := []int64{}
	for _, c := range list {
		out = append(out, c.Version)
	}
	return out
}

// Bad input is refused with an error that names it, and stores nothing.
func TestCheckpointBadInput(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		store := fence.New(tb.be.Client, &fence.Options{MaxCheckpointBytes: 64})
		tb.submit(t, spec("bad", node("n")))
		c := tb.claim(t, "bad", "n", "w", longTTL)
		for _, tc := range []struct {
			w    fence.CheckpointWrite
			want error
			says string
		}{
			{fence.CheckpointWrite{NS: "a{b}", Data: json.RawMessage(`1`)}, fence.ErrInvalidID, `ns "a{b}"`},
			{fence.CheckpointWrite{NS: "a", ID: "x y", Data: json.RawMessage(`1`)}, fence.ErrInvalidID, "checkpoint id"},
			{fence.CheckpointWrite{NS: "a", Data: json.RawMessage(`{oops`)}, fence.ErrInvalidData, "data is not JSON"},
			{fence.CheckpointWrite{NS: "a", Data: json.RawMessage(`1`), Metadata: json.RawMessage(`[`)}, fence.ErrInvalidData, "metadata"},
			{fence.CheckpointWrite{NS: "a", Data: json.RawMessage(`"` + strings.Repeat("x", 100) + `"`)}, fence.ErrTooLarge, "at most 64"},
		} {
			_, err := store.SaveCheckpoint(tb.ctx, c.Lease, tc.w)
			require.ErrorIs(t, err, tc.want)
			require.ErrorContains(t, err, tc.says)
		}
		nss, err := store.CheckpointNamespaces(tb.ctx, "bad")
		require.NoError(t, err)
		require.Empty(t, nss, "nothing stored")
		require.Empty(t, ofType(tb.events(t, "bad"), "stale_rejected"), "bad input is not a stale write")
	})
}

// A checkpoint is accepted only from the current claim of a RUNNING node of
// the thread's active run. Everything else is refused as fenced, recorded
// as stale_rejected with op=checkpoint, and leaves the latest checkpoint as
// it was.
func TestCheckpointFencing(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.submit(t, spec("f", node("n"), node("m")))
		old := tb.claim(t, "f", "n", "w1", shortTTL)
		_, err := tb.save(t, old, "n", "first", `{"turn":1}`)
		require.NoError(t, err)

		tb.advance(t, pastExpiry)
		cur := tb.claim(t, "f", "n", "w2", longTTL) // a takeover: epoch 2
		_, err = tb.save(t, cur, "n", "second", `{"turn":2}`)
		require.NoError(t, err)

		forged := cur.Lease
		forged.ClaimID = "another-claim"
		m := tb.claim(t, "f", "m", "w2", longTTL)
		tb.commit(t, m, `"m done"`)
		for _, tc := range []struct {
			name  string
			lease fence.Lease
			want  error
		}{
			{"stale epoch", old.Lease, fence.ErrStaleEpoch},
			{"same epoch, another claim id", forged, fence.ErrNotOwner},
			{"finished node", m.Lease, fence.ErrNotRunning},
		} {
			_, err := tb.store.SaveCheckpoint(tb.ctx, tc.lease, fence.CheckpointWrite{NS: "n", ID: "late",
				Data: json.RawMessage(`{"turn":0}`)})
			require.ErrorIs(t, err, tc.want, tc.name)
			require.True(t, fence.IsFenced(err), tc.name)
		}
		latest, err := tb.store.LatestCheckpoint(tb.ctx, "f", "n")
		require.NoError(t, err)
		require.Equal(t, "second", latest.ID, "the newest checkpoint is the current owner's")
		rejected := ofType(tb.events(t, "f"), "stale_rejected")
		require.Len(t, rejected, 3)
		for _, e := range rejected {
			require.Equal(t, "checkpoint", e.Details["op"])
		}
	})
}

// Versions strictly increase while 16 writers race for one node across
// takeovers: in every round exactly one claim wins, every writer then tries
// to save with the lease it last won, and only the current owner's save is
// accepted, with a version above every earlier one. On miniredis each round
// ends with the owner's lease running out (a takeover, the clock moved); on
// a real server, where that would take real time, with a release.
func TestCheckpointVersionsUnderRacingWriters(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		rounds := 1000
		if !tb.real() {
			rounds = 200 // miniredis serialises everything behind one lock
		}
		ttl := longTTL
		if !tb.real() {
			ttl = shortTTL
		}
		tb.submit(t, spec("race", node("n").attempts(rounds+1)))
		const writers = 16
		leases := make([]*fence.Lease, writers)
		var last int64
		for round := 0; round < rounds; round++ {
			var wg sync.WaitGroup
			claimed := make([]*fence.Claimed, writers)
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					claimed[w], _ = tb.store.Claim(tb.ctx, ref("race", "n"), fmt.Sprintf("w%d", w), ttl, grace)
				}()
			}
			wg.Wait()
			winner := -1
			for w, c := range claimed {
				if c != nil {
					require.Equal(t, -1, winner, "round %d: two claims won", round)
					winner = w
					leases[w] = &c.Lease
				}
			}
			require.NotEqual(t, -1, winner, "round %d: no claim won", round)

			saved := make([]*fence.Checkpoint, writers)
			errs := make([]error, writers)
			for w := range writers {
				if leases[w] == nil {
					continue
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					cp, err := tb.store.SaveCheckpoint(tb.ctx, *leases[w], fence.CheckpointWrite{NS: "state",
						ID: fmt.Sprintf("r%d-w%d", round, w), Data: json.RawMessage(fmt.Sprintf(`{"round":%d}`, round))})
					saved[w], errs[w] = &cp, err
				}()
			}
			wg.Wait()
			for w := range writers {
				switch {
				case leases[w] == nil:
				case w == winner:
					require.NoError(t, errs[w], "round %d: the owner's save", round)
					require.Greater(t, saved[w].Version, last, "round %d: versions grow", round)
					last = saved[w].Version
				default:
					require.True(t, fence.IsFenced(errs[w]), "round %d: writer %d saved with a lost lease: %v", round, w, errs[w])
				}
			}
			if tb.real() {
				_, err := tb.store.Release(tb.ctx, *leases[winner], "next round")
				require.NoError(t, err)
			} else {
				tb.advance(t, pastExpiry) // the owner stalls: the next claim is a takeover
			}
		}
		latest, err := tb.store.LatestCheckpoint(tb.ctx, "race", "state")
		require.NoError(t, err)
		require.Equal(t, int64(rounds), latest.Version, "one accepted save per round")
		if !tb.real() {
			require.Len(t, ofType(tb.events(t, "race"), "takeover"), rounds-1, "every later round was a takeover")
		}
		require.JSONEq(t, fmt.Sprintf(`{"round":%d}`, rounds-1), string(latest.Data))
	})
}

// Pending writes (LangGraph's putWrites) are kept per checkpoint and task,
// fenced like checkpoints: a write with idx >= 0 is kept once, idx < 0
// overwrites, and they go when their checkpoint is trimmed or deleted.
func TestPendingWrites(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.submit(t, spec("pw", node("n")))
		c := tb.claim(t, "pw", "n", "w", longTTL)
		_, err := tb.save(t, c, "", "cp1", `{"step":1}`)
		require.NoError(t, err)
		put := func(l fence.Lease, id string, ws ...fence.PendingWrite) (int, error) {
			return tb.store.PutWrites(tb.ctx, l, "", id, "task-1", ws)
		}
		n, err := put(c.Lease, "cp1", fence.PendingWrite{Idx: 0, Channel: "messages", Value: json.RawMessage(`"hi"`)},
			fence.PendingWrite{Idx: -1, Channel: "__error__", Value: json.RawMessage(`"boom"`)})
		require.NoError(t, err)
		require.Equal(t, 2, n)
		n, err = put(c.Lease, "cp1", fence.PendingWrite{Idx: 0, Channel: "messages", Value: json.RawMessage(`"again"`)},
			fence.PendingWrite{Idx: -1, Channel: "__error__", Value: json.RawMessage(`"boom 2"`)})
		require.NoError(t, err)
		require.Equal(t, 1, n, "idx 0 is kept once; idx -1 overwrites")
		ws, err := tb.store.PendingWrites(tb.ctx, "pw", "", "cp1")
		require.NoError(t, err)
		require.ElementsMatch(t, []fence.PendingWrite{
			{Task: "task-1", Idx: 0, Channel: "messages", Value: json.RawMessage(`"hi"`)},
			{Task: "task-1", Idx: -1, Channel: "__error__", Value: json.RawMessage(`"boom 2"`)},
		}, ws)

		_, err = put(c.Lease, "nope", fence.PendingWrite{Channel: "x"})
		require.ErrorIs(t, err, fence.ErrNoCheckpoint)
		_, err = tb.store.Release(tb.ctx, c.Lease, "drain")
		require.NoError(t, err)
		_, err = put(c.Lease, "cp1", fence.PendingWrite{Idx: 1, Channel: "late"})
		require.ErrorIs(t, err, fence.ErrNotRunning)
		require.True(t, fence.IsFenced(err))
		ws, err = tb.store.PendingWrites(tb.ctx, "pw", "", "cp1")
		require.NoError(t, err)
		require.Len(t, ws, 2, "the refused write stored nothing")
	})
}

// A thread's checkpoints cannot be deleted while it has an active run;
// afterwards they can, and versions are not reused.
func TestDeleteCheckpoints(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		args := spec("del-1", node("n"))
		args.Thread = "chat"
		tb.submit(t, args)
		c, err := tb.store.Claim(tb.ctx, fence.NodeRef{Thread: "chat", Run: "del-1", Node: "n"}, "w", longTTL, grace)
		require.NoError(t, err)
		_, err = tb.save(t, c, "n", "a", `1`)
		require.NoError(t, err)
		_, err = tb.store.DeleteCheckpoints(tb.ctx, "chat")
		require.ErrorIs(t, err, fence.ErrThreadBusy)
		tb.commit(t, c, `"done"`)

		deleted, err := tb.store.DeleteCheckpoints(tb.ctx, "chat")
		require.NoError(t, err)
		require.Equal(t, 1, deleted)
		_, err = tb.store.LatestCheckpoint(tb.ctx, "chat", "n")
		require.ErrorIs(t, err, fence.ErrNoCheckpoint)

		args = spec("del-2", node("n"))
		args.Thread = "chat"
		tb.submit(t, args)
		c, err = tb.store.Claim(tb.ctx, fence.NodeRef{Thread: "chat", Run: "del-2", Node: "n"}, "w", longTTL, grace)
		require.NoError(t, err)
		got, err := tb.save(t, c, "n", "b", `2`)
		require.NoError(t, err)
		require.Equal(t, int64(2), got.Version, "a version is never reused")
	})
}

// A thread's checkpoints are deleted from inside its active run only by the
// current claim (a saver's deleteThread): a stale claim, a forged claim id
// or a finished node is refused as fenced, recorded as stale_rejected with
// op=checkpoint_delete, and deletes nothing, even after the run ended.
func TestDeleteThreadCheckpointsFenced(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		args := spec("dt-1", node("n"), node("m"))
		args.Thread = "talk"
		tb.submit(t, args)
		ref := func(id string) fence.NodeRef { return fence.NodeRef{Thread: "talk", Run: "dt-1", Node: id} }
		old, err := tb.store.Claim(tb.ctx, ref("n"), "w1", shortTTL, grace)
		require.NoError(t, err)
		for _, ns := range []string{"", "n", "sub:1|x"} {
			_, err = tb.save(t, old, ns, "c-"+strings.NewReplacer(":", "", "|", "").Replace(ns), `{"turn":1}`)
			require.NoError(t, err)
		}
		tb.advance(t, pastExpiry)
		cur, err := tb.store.Claim(tb.ctx, ref("n"), "w2", longTTL, grace) // a takeover: epoch 2
		require.NoError(t, err)
		forged := cur.Lease
		forged.ClaimID = "another-claim"
		m, err := tb.store.Claim(tb.ctx, ref("m"), "w2", longTTL, grace)
		require.NoError(t, err)
		tb.commit(t, m, `"m done"`)
		refuse := func(when string, namespaces int) {
			for _, tc := range []struct {
				name  string
				lease fence.Lease
				want  error
			}{
				{"stale epoch", old.Lease, fence.ErrStaleEpoch},
				{"same epoch, another claim id", forged, fence.ErrNotOwner},
				{"finished node", m.Lease, fence.ErrNotRunning},
			} {
				_, err := tb.store.DeleteThreadCheckpoints(tb.ctx, tc.lease)
				require.ErrorIs(t, err, tc.want, "%s: %s", when, tc.name)
				require.True(t, fence.IsFenced(err), "%s: %s", when, tc.name)
				nss, err := tb.store.CheckpointNamespaces(tb.ctx, "talk")
				require.NoError(t, err)
				require.Len(t, nss, namespaces, "%s: %s deleted nothing", when, tc.name)
			}
		}
		refuse("while the run is active", 3)
		rejected := ofType(tb.events(t, "dt-1"), "stale_rejected")
		require.Len(t, rejected, 3)
		for _, e := range rejected {
			require.Equal(t, "checkpoint_delete", e.Details["op"])
		}

		deleted, err := tb.store.DeleteThreadCheckpoints(tb.ctx, cur.Lease)
		require.NoError(t, err)
		require.Equal(t, 3, deleted)
		nss, err := tb.store.CheckpointNamespaces(tb.ctx, "talk")
		require.NoError(t, err)
		require.Empty(t, nss)
		got, err := tb.save(t, cur, "", "again", `{"turn":2}`)
		require.NoError(t, err)
		require.Equal(t, int64(2), got.Version, "a version is never reused")

		// Once the run has ended, nobody's lease deletes anything.
		tb.commit(t, cur, `"done"`)
		refuse("after the run ended", 1)
		_, err = tb.store.DeleteThreadCheckpoints(tb.ctx, cur.Lease)
		require.ErrorIs(t, err, fence.ErrNotRunning)
	})
}
