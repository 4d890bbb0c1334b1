package fence_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// The waits index (ref -> when the wait times out) is a trigger the sweep
// reads every tick: an entry left behind by a wait that ended otherwise
// would cost a script call every sweep, forever. Whatever ended the wait
// (a resume, a cancel, the run packed, the timeout itself, a later park
// of the node), the entry is gone after at most one sweep past its time.
// (Issue 42's third suspicion; checked, not reproduced.)
func TestWaitTimeoutIndexLeavesNothingBehind(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		indexed := func(run string) int64 {
			n, err := tb.be.Client.ZCard(tb.ctx, fence.Keys{}.Waits(fence.ShardOf(run))).Result()
			require.NoError(t, err)
			return n
		}
		park := func(run string, id string) {
			t.Helper()
			c := tb.claim(t, run, "a", "w", longTTL)
			_, err := tb.store.Park(tb.ctx, c.Lease, fence.Wait{ID: id, Timeout: time.Second})
			require.NoError(t, err)
		}
		sweep := func() {
			t.Helper()
			_, err := tb.store.TimeOutWaits(tb.ctx, "sweeper", 100)
			require.NoError(t, err)
		}
		for _, c := range []struct {
			name string
			end  func(run string)
		}{
			{"resumed", func(run string) {
				_, err := tb.store.Resume(tb.ctx, run, "a", "w-"+run, []byte(`1`), "me")
				require.NoError(t, err)
			}},
			{"cancelled", func(run string) {
				_, err := tb.store.Cancel(tb.ctx, run, "test", "me")
				require.NoError(t, err)
			}},
			{"cancelled and packed", func(run string) {
				_, err := tb.store.Cancel(tb.ctx, run, "test", "me")
				require.NoError(t, err)
				_, err = tb.store.RetainFinished(tb.ctx, time.Hour, 100)
				require.NoError(t, err)
			}},
			{"timed out, then parked again under the same id", func(run string) {
				tb.advance(t, 1100*time.Millisecond)
				sweep()
				park(run, "w-"+run)
				_, err := tb.store.Resume(tb.ctx, run, "a", "w-"+run, []byte(`1`), "me")
				require.NoError(t, err)
			}},
		} {
			t.Run(c.name, func(t *testing.T) {
				run := "wi-" + map[string]string{"resumed": "a", "cancelled": "b", "cancelled and packed": "c",
					"timed out, then parked again under the same id": "d"}[c.name]
				tb.submit(t, spec(run, node("a")))
				park(run, "w-"+run)
				require.EqualValues(t, 1, indexed(run))
				c.end(run)
				tb.advance(t, 1100*time.Millisecond)
				sweep()
				require.Zero(t, indexed(run), "one sweep past the time leaves no entry")
			})
		}
	})
}
