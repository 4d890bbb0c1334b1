package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/spec"
)

// gate is a kind whose attempts start (started gets the node's id) and
// then wait until release is closed; input {"fail": true} fails for good.
type gate struct {
	started chan string
	release chan struct{}
}

func newGate() *gate { return &gate{started: make(chan string, 16), release: make(chan struct{})} }

func (g *gate) Run(ctx context.Context, t *runner.Task) (json.RawMessage, error) {
	g.started <- t.Lease.Node
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	var in struct{ Fail bool }
	_ = json.Unmarshal(t.Input, &in)
	if in.Fail {
		return nil, runner.Permanent(errors.New("told to fail"))
	}
	return json.RawMessage(`{"done":"` + t.Lease.Node + `"}`), nil
}

// setup starts a redis-server, a worker serving kind "gate", and a client.
func setup(t *testing.T) (*client.Client, *gate) {
	t.Helper()
	rdb := redistest.Start(t).Client(t)
	w, err := runner.NewWorker(runner.WorkerConfig{Redis: rdb, ID: "w1", PollInterval: 10 * time.Millisecond,
		ShutdownTimeout: 5 * time.Second})
	require.NoError(t, err)
	g := newGate()
	w.Register("gate", g)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(w.Shutdown)
	c, err := client.New(client.Config{Redis: rdb})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c, g
}

func submit(t *testing.T, c *client.Client, text string) client.Submitted {
	t.Helper()
	run, err := spec.Parse([]byte(text))
	require.NoError(t, err)
	sub, err := c.Submit(context.Background(), run)
	require.NoError(t, err)
	return sub
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("timed out")
		panic("unreachable")
	}
}

type waited struct {
	info *fence.RunInfo
	err  error
}

func waitAsync(c *client.Client, run string) <-chan waited {
	out := make(chan waited, 1)
	go func() {
		info, err := c.Wait(context.Background(), run)
		out <- waited{info, err}
	}()
	return out
}

// Wait returns once the run has ended, with its nodes as they ended: not
// while a node still runs, and with a typed state a program can compare.
func TestWaitReturnsWhenTheRunEnds(t *testing.T) {
	t.Parallel()
	c, g := setup(t)
	sub := submit(t, c, `{"id": "w-ok", "nodes": [{"id": "a", "kind": "gate"}, {"id": "b", "kind": "gate", "deps": ["a"]}]}`)
	require.Equal(t, client.Running, client.State(sub.Status))
	done := waitAsync(c, sub.RunID)

	require.Equal(t, "a", recv(t, g.started))
	select {
	case w := <-done:
		t.Fatalf("Wait returned while node a ran: %+v", w)
	default:
	}
	close(g.release)
	w := recv(t, done)
	require.NoError(t, w.err)
	require.Equal(t, client.Succeeded, client.State(w.info.Status))
	require.True(t, client.State(w.info.Status).Ended())
	require.Len(t, w.info.Nodes, 2)
	for _, n := range w.info.Nodes {
		require.Equal(t, client.Succeeded, client.State(n.State), n.ID)
		require.JSONEq(t, `{"done":"`+n.ID+`"}`, string(n.Result))
	}

	// A run that has ended already is answered at once.
	info, err := c.Wait(context.Background(), sub.RunID)
	require.NoError(t, err)
	require.Equal(t, client.Succeeded, client.State(info.Status))
}

// A run QUEUED behind its thread's active run is waited for until it has
// run and ended, not reported at once as it stands (the CLI's old `watch`
// trap); a failed run comes back FAILED.
func TestWaitOnAQueuedRunWaitsForItsTurn(t *testing.T) {
	t.Parallel()
	c, g := setup(t)
	first := submit(t, c, `{"id": "q-1", "thread": "t", "nodes": [{"id": "a", "kind": "gate"}]}`)
	require.Equal(t, "a", recv(t, g.started))
	second := submit(t, c, `{"id": "q-2", "thread": "t", "multitask": "enqueue",
		"nodes": [{"id": "b", "kind": "gate", "input": {"fail": true}}]}`)
	require.Equal(t, client.Queued, client.State(second.Status))
	done := waitAsync(c, second.RunID)
	close(g.release)

	w := recv(t, done)
	require.NoError(t, w.err)
	require.Equal(t, client.Failed, client.State(w.info.Status))
	require.Equal(t, client.Failed, client.State(w.info.Nodes[0].State))
	info, err := c.Status(context.Background(), first.RunID)
	require.NoError(t, err)
	require.Equal(t, client.Succeeded, client.State(info.Status), "the first run ended before the second started")
}

// An unknown run is an error at once, and a caller's deadline ends the
// wait with its cause.
func TestWaitRefusesAnUnknownRunAndHonoursCtx(t *testing.T) {
	t.Parallel()
	c, g := setup(t)
	_, err := c.Wait(context.Background(), "no-such-run")
	require.ErrorIs(t, err, fence.ErrNotFound)

	sub := submit(t, c, `{"id": "w-slow", "nodes": [{"id": "a", "kind": "gate"}]}`)
	require.Equal(t, "a", recv(t, g.started))
	ctx, cancel := context.WithTimeoutCause(context.Background(), 200*time.Millisecond, errors.New("caller gave up"))
	defer cancel()
	start := time.Now()
	_, err = c.Wait(ctx, sub.RunID)
	require.ErrorContains(t, err, "caller gave up")
	require.Less(t, time.Since(start), 3*time.Second, "a cancelled wait returns within a read")
	close(g.release)
}
