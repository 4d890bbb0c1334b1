package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWatchCancelledRunExits1(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.submit(t, fmt.Sprintf(pair, "w-1"))
	require.Equal(t, 0, b.run(t, "", "cancel", "w-1").code)

	r := b.run(t, "", "watch", "w-1", "--interval", "20ms")
	require.Equal(t, 1, r.code, "a run that did not succeed")
	require.NotContains(t, r.stdout, "\x1b[", "no terminal escapes into a pipe")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 3, "one line per node, then the run: %q", r.stdout)
	require.Regexp(t, `\sa\s+CANCELLED\s`, lines[0])
	require.Regexp(t, `\srun w-1\s+CANCELLED$`, lines[2])
	require.Contains(t, r.stderr, "run w-1 ended CANCELLED")
}

func TestWatchSucceededRunExits0(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.submit(t, fmt.Sprintf(pair, "w-2"))

	p := b.start(t, "watch", "w-2", "--interval", "20ms")
	require.Regexp(t, `\sa\s+READY\s`, p.next(t))
	require.Regexp(t, `\sb\s+BLOCKED\s`, p.next(t))
	require.Regexp(t, `\srun w-2\s+RUNNING$`, p.next(t))

	b.finish(t, "w-2") // while watch is polling
	rest, code := p.wait(t)
	require.Equal(t, 0, code, p.stderr.String())
	require.NotEmpty(t, rest)
	require.Regexp(t, `\srun w-2\s+SUCCEEDED$`, rest[len(rest)-1])
	require.Regexp(t, `\sb\s+SUCCEEDED\s+attempt 1/3\s+epoch 1\s+owner test-worker\s`, strings.Join(rest, "\n"))
}

func TestWatchErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.run(t, "", "watch", "nope")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "run nope not found")

	r = b.run(t, "", "watch", "a:b")
	require.Equal(t, 2, r.code)

	r = b.run(t, "", "watch", "r", "--interval", "0s")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "--interval")
}

// A QUEUED run is watched until it has started and ended, as events
// --follow does, not reported as ended QUEUED.
func TestWatchQueuedRunWaitsForIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.submit(t, `{"id": "q-1", "thread": "wq", "multitask": "enqueue", "nodes": [{"id": "a", "kind": "noop"}]}`)
	b.submit(t, `{"id": "q-2", "thread": "wq", "multitask": "enqueue", "nodes": [{"id": "a", "kind": "noop"}]}`)
	require.Equal(t, "QUEUED", b.status(t, "q-2").Status)

	p := b.start(t, "watch", "q-2", "--interval", "20ms")
	require.Regexp(t, `\sa\s+BLOCKED\s`, p.next(t))
	require.Regexp(t, `\srun q-2\s+QUEUED$`, p.next(t))
	b.finish(t, "q-1")
	_, err := b.client.Store().Promote(context.Background(), "wq", "test")
	require.NoError(t, err)
	b.finish(t, "q-2")
	rest, code := p.wait(t)
	require.Equal(t, 0, code, p.stderr.String())
	require.Regexp(t, `\srun q-2\s+SUCCEEDED$`, rest[len(rest)-1])
}
