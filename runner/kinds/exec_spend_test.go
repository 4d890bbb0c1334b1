package kinds_test

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/runner/kinds"
)

// ::spend lines add up to the attempt's reported cost and stay out of the
// result; a bad one is logged and ignored, and the attempt goes on.
func TestExecSpendLinesReportTheCost(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	task := newTask("exec", execInput(t, `
		echo '::spend 1200'
		echo '::spend -5'
		echo '::spend 2.5'
		echo '::spend lots'
		echo '::spend 99999999999999999999'
		echo '  ::spend 300 '
		echo done`, "", nil))
	_, ok := task.Spent()
	require.False(t, ok, "nothing reported before the command runs")
	out, err := kinds.Exec(kinds.ExecOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))}).Run(context.Background(), task)
	require.NoError(t, err)
	assert.Equal(t, strconv.Quote("done"), string(out), "::spend lines, good or bad, are not result")
	n, ok := task.Spent()
	require.True(t, ok)
	assert.Equal(t, int64(1500), n)
	assert.Equal(t, 4, bytes.Count(logs.Bytes(), []byte("spend_line_ignored")), logs.String())
	assert.Contains(t, logs.String(), `want a whole number from 0 to 2^40`)
}

// Task.Spend refuses what cannot be a cost, naming it, and keeps the total.
func TestTaskSpendRefusesBadInput(t *testing.T) {
	t.Parallel()
	task := newTask("exec", `{}`)
	require.NoError(t, task.Spend(10))
	require.ErrorContains(t, task.Spend(-1), "spend -1")
	require.Error(t, task.Spend(1<<40+1))
	require.NoError(t, task.Spend(1<<40-10))
	require.ErrorContains(t, task.Spend(1), "would pass 2^40")
	n, _ := task.Spent()
	assert.Equal(t, int64(1<<40), n)
}
