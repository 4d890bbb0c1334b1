package fence_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
)

// FuzzEvents: whatever a run's event stream holds, Store.Events decodes
// each entry without panicking: type, node and worker as written, epoch
// and at as numbers (0 when they are not; out of range, the nearest
// int64), every other field in Details,
// nothing lost and nothing invented. The entries are written to a
// miniredis with XADD, as the scripts do.
func FuzzEvents(f *testing.F) {
	f.Add("claimed", "deploy", "1", "worker-1", "1700000000000", "attempt", "1")
	f.Add("stale_rejected", "deploy", "1", "worker-3", "1700000000123", "current_epoch", "2")
	f.Add("takeover", "deploy", "2", "worker-2", "1700000000456", "prev_owner", "worker-3")
	f.Add("run_finished", "", "0", "", "1700000000789", "status", "SUCCEEDED")
	f.Add("", "", "", "", "", "", "")
	f.Add("x", "n", "-5", "w", "-1", "type", "shadowed")
	f.Add("x", "n", "99999999999999999999", "w", "1e3", "epoch", "7")
	f.Add("x", "n\x00\xff", "0x10", "w\n", "9223372036854775807", "détail", "ü")

	_, rdb := redistest.Mini(f)
	store := fence.New(rdb, nil)
	keys := fence.Keys{}
	var runs atomic.Int64

	f.Fuzz(func(t *testing.T, typ, node, epoch, worker, at, key, val string) {
		ctx := context.Background()
		thread, run := "t", "r"+strconv.FormatInt(runs.Add(1), 10)
		fields := []string{"type", typ, "node", node, "epoch", epoch, "worker", worker, "at", at, key, val}
		values := make([]any, len(fields))
		want := map[string]string{} // a field written twice: the last one counts
		for i := range fields {
			values[i] = fields[i]
			if i%2 == 1 {
				want[fields[i-1]] = fields[i]
			}
		}
		require.NoError(t, rdb.Set(ctx, keys.Locator(run), thread, 0).Err())
		id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: keys.Events(thread, run), Values: values}).Result()
		require.NoError(t, err)
		t.Cleanup(func() { rdb.Del(ctx, keys.Locator(run), keys.Events(thread, run)) })

		evs, err := store.Events(ctx, run, "", 0)
		require.NoError(t, err)
		require.Len(t, evs, 1)
		e := evs[0]
		require.Equal(t, id, e.ID)
		require.Equal(t, want["type"], e.Type)
		require.Equal(t, want["node"], e.Node)
		require.Equal(t, want["worker"], e.Worker)
		n, _ := strconv.ParseInt(want["epoch"], 10, 64) // 0 if not a number; out of range: the nearest int64
		require.Equal(t, n, e.Epoch)
		ms, _ := strconv.ParseInt(want["at"], 10, 64)
		require.True(t, time.UnixMilli(ms).Equal(e.At), "at %q read as %v", want["at"], e.At)
		for _, k := range []string{"type", "node", "epoch", "worker", "at"} {
			delete(want, k)
		}
		require.Equal(t, want, e.Details)

		more, err := store.Events(ctx, run, e.ID, 0)
		require.NoError(t, err)
		require.Empty(t, more, "reading after the last event returns nothing")
	})
}
