package kinds_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/kinds"
)

// ckptBundle is a real redis-server, a client, and one worker running the
// exec kind, whose warnings the test reads.
type ckptBundle struct {
	t      *testing.T
	rdb    redis.UniversalClient
	client *runner.Client
	logs   *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// ckptSetup starts the bundle; hooks, if any, sit on the worker's Redis
// client only.
func ckptSetup(t *testing.T, hooks ...redis.Hook) *ckptBundle {
	t.Helper()
	srv := redistest.Start(t)
	client, err := runner.NewClient(runner.ClientConfig{Redis: srv.Client(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	wrdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	for _, h := range hooks {
		wrdb.AddHook(h)
	}
	t.Cleanup(func() { _ = wrdb.Close() })
	b := &ckptBundle{t: t, rdb: srv.Client(t), client: client, logs: &lockedBuffer{}}
	log := slog.New(slog.NewJSONHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w, err := runner.NewWorker(runner.WorkerConfig{Redis: wrdb, ID: "w1", Logger: log,
		LeaseTTL: 3 * time.Second, Grace: 100 * time.Millisecond, SweepInterval: 100 * time.Millisecond,
		PollInterval: 10 * time.Millisecond, RetryBase: 20 * time.Millisecond, RetryMax: 50 * time.Millisecond})
	require.NoError(t, err)
	w.Register("exec", kinds.Exec(kinds.ExecOptions{Logger: log}))
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(w.Shutdown)
	return b
}

// run submits a run of one exec node, "step", running script with sh, and
// waits for it to end.
func (b *ckptBundle) run(id, thread, script string, maxAttempts int, env map[string]string) *fence.RunInfo {
	b.t.Helper()
	spec := map[string]any{"id": id, "nodes": []any{map[string]any{"id": "step", "kind": "exec", "max_attempts": maxAttempts,
		"input": map[string]any{"command": []string{"sh", "-c", script}, "env": env}}}}
	if thread != "" {
		spec["thread"] = thread
	}
	raw, err := json.Marshal(spec)
	require.NoError(b.t, err)
	s, err := runner.ParseSpec(raw)
	require.NoError(b.t, err)
	_, err = b.client.Submit(context.Background(), s)
	require.NoError(b.t, err)
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := b.client.Status(context.Background(), id)
		require.NoError(b.t, err)
		if info.Status != "RUNNING" && info.Status != "PENDING" {
			return info
		}
		require.True(b.t, time.Now().Before(deadline), "run %s still %s", id, info.Status)
		time.Sleep(20 * time.Millisecond) // polling the store for the outcome under test
	}
}

func (b *ckptBundle) history(thread, ns string) []fence.Checkpoint {
	b.t.Helper()
	list, _, err := b.client.Checkpoints(context.Background(), thread, ns, 0, 1000)
	require.NoError(b.t, err)
	return list
}

// warnings returns the checkpoint_line_ignored log records.
func (b *ckptBundle) warnings() []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(b.logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "checkpoint_line_ignored" {
			out = append(out, rec)
		}
	}
	return out
}

// Good ::checkpoint lines are saved in order, a line that is not JSON is
// skipped with a warning naming the problem and the node, the attempt goes
// on, and no ::checkpoint line is part of the result.
func TestExecCheckpointLinesAreSavedAndBadOnesSkipped(t *testing.T) {
	t.Parallel()
	b := ckptSetup(t)
	long := `{"blob":"` + strings.Repeat("x", 20000) + `"}` // read in several pieces
	info := b.run("lines", "conv", `
		echo '::checkpoint {"step": 1}'
		echo '::checkpoint {"step": 2'
		echo '::checkpoint'
		echo '::checkpoint `+long+`'
		echo '  ::checkpoint {"step": 3}  '
		echo '::checkpointed is just output'
		echo '{"done": true}'`, 1, nil)

	require.Equal(t, "SUCCEEDED", info.Status, info.Nodes[0].Error)
	require.JSONEq(t, `"::checkpointed is just output\n{\"done\": true}"`, string(info.Nodes[0].Result))
	list := b.history("conv", "step")
	require.Len(t, list, 3, "the two malformed lines stored nothing")
	require.Equal(t, `{"step": 3}`, string(list[0].Data), "stored as printed, trimmed")
	require.Equal(t, long, string(list[1].Data))
	require.Equal(t, `{"step": 1}`, string(list[2].Data))
	require.Equal(t, "lines", list[0].Run)
	require.Equal(t, int64(1), list[0].Epoch)

	warns := b.warnings()
	require.Len(t, warns, 2)
	for _, w := range warns {
		require.Equal(t, "WARN", w["level"])
		require.Equal(t, "step", w["node_id"])
		require.Equal(t, "lines", w["run_id"])
	}
	require.Contains(t, warns[0]["reason"], "not valid JSON")
	require.Contains(t, warns[1]["reason"], "no JSON after ::checkpoint")
}

// A ::checkpoint line over the cap is refused without a round trip; the
// attempt goes on.
func TestExecCheckpointOverTheCapIsSkipped(t *testing.T) {
	t.Parallel()
	b := ckptSetup(t)
	info := b.run("big", "", `
		printf '::checkpoint "'; head -c 1100000 /dev/zero | tr '\0' a; echo '"'
		echo '::checkpoint {"small": true}'
		echo ok`, 1, nil)
	require.Equal(t, "SUCCEEDED", info.Status, info.Nodes[0].Error)
	require.JSONEq(t, `"ok"`, string(info.Nodes[0].Result))
	list := b.history("big", "step")
	require.Len(t, list, 1)
	require.JSONEq(t, `{"small": true}`, string(list[0].Data))
	warns := b.warnings()
	require.Len(t, warns, 1)
	require.Contains(t, warns[0]["reason"], "over the checkpoint cap")
	require.Equal(t, "step", warns[0]["node_id"])
}

// Every attempt gets BATON_THREAD_ID; an attempt of a node with a
// checkpoint gets BATON_CHECKPOINT_FILE holding exactly the newest saved
// JSON, in a directory removed after the attempt. An input env cannot
// point it elsewhere.
func TestExecResumesFromTheCheckpointFile(t *testing.T) {
	t.Parallel()
	b := ckptSetup(t)
	paths := t.TempDir() + "/paths"
	script := `
		echo "$BATON_CHECKPOINT_FILE" >> ` + paths + `
		if [ -z "$BATON_CHECKPOINT_FILE" ]; then
			echo '::checkpoint {"step": 5,  "note": "spaces kept"}'
			exit 1
		fi
		printf '{"thread": "%s", "saved": %s}' "$BATON_THREAD_ID" "$(cat "$BATON_CHECKPOINT_FILE")"`
	info := b.run("resume", "", script, 2, map[string]string{"BATON_CHECKPOINT_FILE": "/etc/hostname"})

	require.Equal(t, "SUCCEEDED", info.Status, info.Nodes[0].Error)
	require.Equal(t, int64(2), info.Nodes[0].Attempt)
	require.JSONEq(t, `{"thread": "resume", "saved": {"step": 5, "note": "spaces kept"}}`, string(info.Nodes[0].Result),
		"a run without a thread is its own thread; the second attempt read the first one's checkpoint")
	raw, err := os.ReadFile(paths)
	require.NoError(t, err)
	seen := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	require.Len(t, seen, 2)
	require.Empty(t, seen[0], "the first attempt had no checkpoint (and not the input's)")
	require.NotEmpty(t, seen[1])
	_, err = os.Stat(seen[1])
	require.ErrorIs(t, err, os.ErrNotExist, "the file is removed after the attempt")
	cp, err := b.client.LatestCheckpoint(context.Background(), "resume", "step")
	require.NoError(t, err)
	require.Equal(t, `{"step": 5,  "note": "spaces kept"}`, string(cp.Data))
}

// slowCheckpoints delays every checkpoint save (an EVALSHA over a
// namespace key) by delay, as a slow or distant Redis would.
type slowCheckpoints struct{ delay time.Duration }

func (s slowCheckpoints) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s slowCheckpoints) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (s slowCheckpoints) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			for _, a := range cmd.Args() {
				if k, ok := a.(string); ok && strings.Contains(k, ":cpv:") {
					time.Sleep(s.delay)
					break
				}
			}
		}
		return next(ctx, cmd)
	}
}

// A command that prints its checkpoints and exits at once has them stored
// before its node commits, and its last line still makes the result,
// however slow the saves: each line waits for the save before it.
func TestExecCheckpointsBeforeExitAreStoredBeforeTheCommit(t *testing.T) {
	t.Parallel()
	b := ckptSetup(t, slowCheckpoints{delay: 700 * time.Millisecond})
	// Blank lines (dropped from the result) keep what follows each save in
	// the pipe, not in the reader's buffer.
	info := b.run("exit", "", `
		echo '::checkpoint {"step": 1}'
		head -c 10000 /dev/zero | tr '\0' '\n'
		echo '::checkpoint {"step": 2}'
		head -c 10000 /dev/zero | tr '\0' '\n'
		echo '{"done": true}'`, 1, nil)
	require.Equal(t, "SUCCEEDED", info.Status, info.Nodes[0].Error)
	require.JSONEq(t, `{"done": true}`, string(info.Nodes[0].Result), "the line after the slow saves was read")
	evs, err := b.client.Events(context.Background(), "exit", "", 0)
	require.NoError(t, err)
	var order []string
	for _, e := range evs {
		switch e.Type {
		case "checkpointed", "committed":
			order = append(order, e.Type)
		}
	}
	require.Equal(t, []string{"checkpointed", "checkpointed", "committed"}, order)
	require.Len(t, b.history("exit", "step"), 2)
}

// A save the store refuses stops the command as a lost lease does: the
// group gets SIGTERM at once, the lines after it are not saved, and the
// attempt's result is never committed.
func TestExecRefusedCheckpointStopsTheCommand(t *testing.T) {
	t.Parallel()
	b := ckptSetup(t)
	dir := t.TempDir()
	gate, pidfile := dir+"/gate", dir+"/pid"
	script := `
		echo $$ > ` + pidfile + `
		echo '::checkpoint {"step": 1}'
		while [ ! -e ` + gate + ` ]; do sleep 0.01; done
		echo '::checkpoint {"step": 2}'
		sleep 30
		echo '::checkpoint {"step": 3}'`
	done := make(chan *fence.RunInfo, 1)
	go func() { done <- b.run("refused", "chat", script, 1, nil) }()

	pid := readPID(t, pidfile)
	require.Eventually(t, func() bool { return len(b.history("chat", "step")) == 1 }, 10*time.Second, 5*time.Millisecond)
	// The thread moves on to another run: this run's saves are refused.
	require.NoError(t, b.rdb.Set(context.Background(), fence.Keys{}.Active("chat"), "other-run", 0).Err())
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	requireGone(t, pid) // long before its 30 s sleep ends

	info := <-done
	require.Equal(t, "FAILED", info.Status, "the abandoned attempt's lease ran out; no attempt was left")
	require.Nil(t, info.Nodes[0].Result)
	list := b.history("chat", "step")
	require.Len(t, list, 1)
	require.Equal(t, `{"step": 1}`, string(list[0].Data))
	evs, err := b.client.Events(context.Background(), "refused", "", 0)
	require.NoError(t, err)
	var refused int
	for _, e := range evs {
		require.NotEqual(t, "committed", e.Type)
		if e.Type == "stale_rejected" && e.Details["op"] == "checkpoint" {
			refused++
		}
	}
	require.Equal(t, 1, refused)
	require.Contains(t, b.logs.String(), `"msg":"attempt_abandoned"`)
}
