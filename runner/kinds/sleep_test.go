package kinds_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/kinds"
)

func TestSleepSleepsAndReportsWhatItSlept(t *testing.T) {
	t.Parallel()
	for input, want := range map[string]string{
		`{"duration":"150ms"}`: `{"slept":"150ms"}`,
		`{"duration":0.15}`:    `{"slept":"150ms"}`,
		`{"duration":0}`:       `{"slept":"0s"}`,
	} {
		task := newTask("sleep", input)
		start := time.Now()
		out, err := kinds.Sleep().Run(context.Background(), task)
		require.NoError(t, err, input)
		assert.JSONEq(t, want, string(out), input)
		assert.Equal(t, 100, task.Progress(), input)
		if input != `{"duration":0}` {
			assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond, input)
		}
	}
}

func TestSleepProgressAdvancesAndCancelReturnsTheCause(t *testing.T) {
	t.Parallel()
	task := newTask("sleep", `{"duration":"10s"}`)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	errc := make(chan error, 1)
	go func() {
		_, err := kinds.Sleep().Run(ctx, task)
		errc <- err
	}()

	// Steps are 1/20th of 10s: the first arrives after 500ms.
	require.Eventually(t, func() bool { return task.Progress() >= 5 }, 10*time.Second, 10*time.Millisecond)
	assert.Less(t, task.Progress(), 100)
	cancel(runner.ErrShutdown)

	select {
	case err := <-errc:
		require.Error(t, err)
		assert.True(t, errors.Is(err, runner.ErrShutdown), "err = %v", err)
		assert.False(t, runner.IsPermanent(err))
	case <-time.After(10 * time.Second):
		t.Fatal("sleep did not return after cancel")
	}
}

func TestSleepRejectsBadInputPermanently(t *testing.T) {
	t.Parallel()
	for _, input := range []string{`{}`, `{"duration":"-1s"}`, `{"duration":"soon"}`, `{"duration":true}`, `nope`} {
		_, err := kinds.Sleep().Run(context.Background(), newTask("sleep", input))
		require.Error(t, err, input)
		assert.True(t, runner.IsPermanent(err), "input %s: err = %v", input, err)
		assert.Contains(t, err.Error(), "sleep: input", input)
	}
}
