package kinds_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/kinds"
)

// A command that exits 75 because its lease is gone ends its attempt with
// the worker's own verdict on the lease: when the worker learns that the
// lease is lost, the attempt's error is that cause, not an exit failure.
func TestExecExit75EndsWithTheWorkersLeaseLoss(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	started := time.Now()
	c := runAsync(ctx, kinds.Exec(kinds.ExecOptions{}), newTask("exec", execInput(t, "exit 75", "", nil)))
	// The heartbeater learns it a little after the command did.
	time.AfterFunc(200*time.Millisecond, func() { cancel(runner.ErrLeaseLost) })
	r := await(t, c)
	require.ErrorIs(t, r.err, runner.ErrLeaseLost)
	var xe *kinds.ExitError
	require.False(t, errors.As(r.err, &xe), "not an exit failure: %v", r.err)
	require.Less(t, time.Since(started), 5*time.Second)
}

// Exit 75 while the worker still holds the lease (the command was wrong,
// or could not reach Redis while its worker could) is an ordinary failed
// attempt once the worker has had about a lease to disagree.
func TestExecExit75WithALiveLeaseIsAFailedAttempt(t *testing.T) {
	t.Parallel()
	task := newTask("exec", execInput(t, "echo gone >&2; exit 75", "", nil))
	task.Lease.Until = time.Now().Add(1500 * time.Millisecond)
	started := time.Now()
	_, err := kinds.Exec(kinds.ExecOptions{}).Run(context.Background(), task)
	var xe *kinds.ExitError
	require.ErrorAs(t, err, &xe)
	require.Equal(t, kinds.ExitLeaseLost, xe.Code)
	require.Equal(t, "gone", xe.Stderr)
	require.False(t, runner.IsPermanent(err))
	require.GreaterOrEqual(t, time.Since(started), time.Second, "the worker had time to disagree")
	require.Contains(t, err.Error(), "reported a lost lease")
}

// With the store, a command gets its node's and run's keys and its claim
// id, and can watch its own lease in any language: here with redis-cli.
// When its node is claimed again (forged here by raising the epoch, as a
// takeover does), the command sees it without writing and exits 75; the
// worker records the attempt as abandoned, not failed, and the node's
// next attempt finishes the run.
func TestExecCommandWatchesItsLeaseAndExit75IsALostAttempt(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("redis-cli is not installed")
	}
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	client, err := runner.NewClient(runner.ClientConfig{Redis: rdb})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	logs := &lockedBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w, err := runner.NewWorker(runner.WorkerConfig{Redis: srv.Client(t), ID: "w1", Logger: log,
		LeaseTTL: 3 * time.Second, Grace: 100 * time.Millisecond, SweepInterval: 100 * time.Millisecond,
		PollInterval: 10 * time.Millisecond, RetryBase: 20 * time.Millisecond, RetryMax: 50 * time.Millisecond})
	require.NoError(t, err)
	w.Register("exec", kinds.Exec(kinds.ExecOptions{Logger: log, RedisURL: srv.URL(), StoreCommands: []string{"*"}}))
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(w.Shutdown)

	// Attempt 1 watches: it stops when the node's epoch or claim is no
	// longer its own. Attempt 2 prints what it was given.
	dir := t.TempDir()
	script := `
		if [ "$BATON_ATTEMPT" != 1 ]; then echo "\"done by $BATON_EPOCH\""; exit 0; fi
		while :; do
			set -- $(redis-cli -u "$BATON_REDIS_URL" HMGET "$BATON_NODE_KEY" epoch claim)
			if [ "$1 $2" != "$BATON_EPOCH $BATON_CLAIM_ID" ]; then echo "epoch $1" > ` + dir + `/gone; exit 75; fi
			touch ` + dir + `/watching
			sleep 0.05
		done`
	spec, err := runner.ParseSpec([]byte(`{"id":"watched","nodes":[{"id":"step","kind":"exec","max_attempts":2,
		"input":{"command":["sh","-c",` + jsonString(t, script) + `]}}]}`))
	require.NoError(t, err)
	_, err = client.Submit(context.Background(), spec)
	require.NoError(t, err)
	node := fence.Keys{}.Node("watched", "watched", "step")
	require.Eventually(t, func() bool { _, err := os.Stat(dir + "/watching"); return err == nil },
		10*time.Second, 5*time.Millisecond, "attempt 1 watching its lease")
	require.NoError(t, rdb.HIncrBy(context.Background(), node, "epoch", 1).Err()) // another claim, as far as the lease can tell

	var info *fence.RunInfo
	require.Eventually(t, func() bool {
		info, err = client.Status(context.Background(), "watched")
		require.NoError(t, err)
		return info.Status != "RUNNING" && info.Status != "PENDING"
	}, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, "SUCCEEDED", info.Status)
	gone, err := os.ReadFile(dir + "/gone")
	require.NoError(t, err)
	require.Equal(t, "epoch 2\n", string(gone), "attempt 1 saw the new epoch and stopped")
	require.JSONEq(t, `"done by 3"`, string(info.Nodes[0].Result))
	var abandoned, failed int
	for _, line := range strings.Split(logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		switch rec["msg"] {
		case "attempt_abandoned":
			abandoned++
			require.Contains(t, rec["handler_err"], "exit code 75, lease lost")
		case "attempt_failed", "node_failed":
			failed++
		}
	}
	require.Equal(t, 1, abandoned, logs.String())
	require.Zero(t, failed, "exit 75 of a lost lease is not a failure of the node")
}

func jsonString(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	require.NoError(t, err)
	return string(b)
}
