package runner

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// A held commit whose acknowledgement never comes is sent alone by its
// timer; one that is taken is sent by whoever took it, once; a second
// commit for the same task is not held.
func TestHeldCommitGoesAloneWithoutAnAcknowledgement(t *testing.T) {
	t.Parallel()
	a := newAcks(20 * time.Millisecond)
	sent := make(chan redis.Scripter, 1)
	require.True(t, a.hold("task-1", func(via redis.Scripter) { sent <- via }))
	require.False(t, a.hold("task-1", func(redis.Scripter) { t.Error("a second commit for task-1 was held") }))
	select {
	case via := <-sent:
		require.Nil(t, via, "sent alone")
	case <-time.After(5 * time.Second):
		t.Fatal("the held commit was never sent")
	}
	require.Nil(t, a.take("task-1", nil), "sent once")

	require.True(t, a.hold("task-2", func(redis.Scripter) {}))
	require.True(t, a.hold("task-3", func(redis.Scripter) {}))
	h := a.take("task-2", nil)
	require.NotNil(t, h)
	require.Equal(t, 1, a.dropAll(), "task-3 dropped, as by a crash")
}
