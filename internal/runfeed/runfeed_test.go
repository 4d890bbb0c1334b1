package runfeed_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/internal/runfeed"
	"github.com/batonrun/baton/spec"
)

// Clients of one run share its reader; past MaxRuns another run is
// refused; the last client to leave stops the reader; a reader sees its
// run end.
func TestHubSharesReadersAndSeesTheEnd(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c, err := client.New(client.Config{Redis: srv.Client(t)})
	require.NoError(t, err)
	for _, id := range []string{"a", "b"} {
		_, err := c.Submit(t.Context(), &spec.Run{ID: id, Nodes: []spec.Node{{ID: "n", Kind: "nobody"}}})
		require.NoError(t, err)
	}
	hub := &runfeed.Hub{Store: c.Store(), MaxRuns: 1}
	f1, ok := hub.Join("a", "a")
	require.True(t, ok)
	f2, ok := hub.Join("a", "a")
	require.True(t, ok)
	assert.Same(t, f1, f2, "one reader per run")
	_, ok = hub.Join("b", "b")
	assert.False(t, ok, "past MaxRuns")
	assert.Equal(t, 1, hub.Runs())

	ended, wake := f1.Ended()
	assert.False(t, ended)
	_, err = c.Cancel(t.Context(), "a", "test")
	require.NoError(t, err)
	for !ended {
		select {
		case <-wake:
		case <-time.After(10 * time.Second):
			t.Fatal("the reader did not see the run end")
		}
		ended, wake = f1.Ended()
	}
	es, behind, done, _ := f1.After("0")
	assert.Empty(t, es)
	assert.False(t, behind, "an empty stream: nothing is older than the reader")
	assert.True(t, done)

	hub.Leave(f1)
	assert.Equal(t, 1, hub.Runs())
	hub.Leave(f2)
	assert.Equal(t, 0, hub.Runs(), "the last client stops the reader")
	_, ok = hub.Join("b", "b")
	assert.True(t, ok, "its place is free again")
}
