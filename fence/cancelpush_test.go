package fence_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// TestCancelPushesToRunningOwners: cancelling a run with running nodes
// publishes it on the cancel channel in the same step that sets the flag,
// naming the run's incarnation; a run with nothing running publishes
// nothing, and a repeated cancel pushes again while nodes still run.
func TestCancelPushesToRunningOwners(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		sub := tb.be.Client.Subscribe(tb.ctx, tb.store.Keys().CancelChannel())
		t.Cleanup(func() { _ = sub.Close() })
		_, err := sub.Receive(tb.ctx) // the subscription's confirmation
		require.NoError(t, err)
		next := func() fence.CancelMessage {
			t.Helper()
			m, err := sub.ReceiveTimeout(tb.ctx, 5*time.Second)
			require.NoError(t, err)
			msg, ok := m.(*redis.Message)
			require.True(t, ok, "got %T, want a message", m)
			cm, err := fence.ParseCancelMessage(msg.Payload)
			require.NoError(t, err)
			return cm
		}

		tb.submit(t, spec("idle", node("a")))
		_, err = tb.store.Cancel(tb.ctx, "idle", "nothing runs", "alice")
		require.NoError(t, err)

		tb.submit(t, spec("busy", node("a"), node("b")))
		a := tb.claim(t, "busy", "a", "w", longTTL)
		res, err := tb.store.Cancel(tb.ctx, "busy", "stop", "alice")
		require.NoError(t, err)
		require.Equal(t, 1, res.Running)
		cm := next() // the idle run's cancel published nothing: this is busy's
		require.Equal(t, "busy", cm.Run)
		require.NotEmpty(t, cm.Incarnation)
		require.True(t, cm.Matches(a.Lease), "the push names the owner's attempt")
		require.True(t, tb.getRun(t, "busy").Cancelled, "the flag was set with the push")

		res, err = tb.store.Cancel(tb.ctx, "busy", "again", "bob")
		require.NoError(t, err)
		require.True(t, res.Already)
		require.Equal(t, "busy", next().Run, "a repeated cancel pushes again")

		_, err = tb.store.Fail(tb.ctx, a.Lease, fence.Failure{Err: "stopped"}, a.Descendants)
		require.NoError(t, err)
		require.Equal(t, "CANCELLED", tb.getRun(t, "busy").Status)
	})
}

func TestParseCancelMessage(t *testing.T) {
	t.Parallel()
	l := fence.Lease{Run: "r1", Incarnation: "abc"}
	for _, c := range []struct {
		payload string
		want    fence.CancelMessage
		matches bool
	}{
		{"r1~abc", fence.CancelMessage{Run: "r1", Incarnation: "abc"}, true},
		{"r1", fence.CancelMessage{Run: "r1"}, true},
		{"r1~def", fence.CancelMessage{Run: "r1", Incarnation: "def"}, false}, // a later run that reused the id
		{"r2~abc", fence.CancelMessage{Run: "r2", Incarnation: "abc"}, false},
	} {
		got, err := fence.ParseCancelMessage(c.payload)
		require.NoError(t, err, c.payload)
		require.Equal(t, c.want, got)
		require.Equal(t, c.matches, got.Matches(l), c.payload)
	}
	for _, bad := range []string{"", "~abc", "r{1}", "r1~", "r1~a:b"} {
		_, err := fence.ParseCancelMessage(bad)
		require.Error(t, err, "%q", bad)
	}
}
