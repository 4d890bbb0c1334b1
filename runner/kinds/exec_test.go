package kinds_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/kinds"
)

// execInput is an exec input running script with sh; $1 is arg.
func execInput(t *testing.T, script, arg string, extra map[string]any) string {
	t.Helper()
	in := map[string]any{"command": []string{"sh", "-c", script, "sh", arg}}
	for k, v := range extra {
		in[k] = v
	}
	b, err := json.Marshal(in)
	require.NoError(t, err)
	return string(b)
}

type execResult struct {
	out json.RawMessage
	err error
}

// runAsync runs k in the background; the result arrives on the channel.
func runAsync(ctx context.Context, k runner.Kind, task *runner.Task) <-chan execResult {
	c := make(chan execResult, 1)
	go func() {
		out, err := k.Run(ctx, task)
		c <- execResult{out, err}
	}()
	return c
}

func await(t *testing.T, c <-chan execResult) execResult {
	t.Helper()
	select {
	case r := <-c:
		return r
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return")
		return execResult{}
	}
}

// readPID waits for the command to write a pid (and its newline) to path.
func readPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(path)
		if err != nil || !bytes.HasSuffix(b, []byte("\n")) {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, 10*time.Second, 5*time.Millisecond, "no pid in %s", path)
	return pid
}

// requireGone waits until pid is no longer a live process. A zombie counts
// as gone: an orphan is reaped by PID 1, which in some sandboxes never
// reaps.
func requireGone(t *testing.T, pid int) {
	t.Helper()
	require.Eventually(t, func() bool {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return true
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		return len(f) > 0 && f[0] == "Z"
	}, 10*time.Second, 5*time.Millisecond, "process %d still running", pid)
}

func TestExecExportsTheLeaseInTheEnvironment(t *testing.T) {
	t.Parallel()
	in := execInput(t,
		`echo "$BATON_RUN_ID $BATON_NODE_ID $BATON_ATTEMPT $BATON_EPOCH $BATON_FENCING_TOKEN $FOO|$PATH"`, "",
		map[string]any{"env": map[string]string{"FOO": "bar", "BATON_EPOCH": "99"}})

	out, err := kinds.Exec(kinds.ExecOptions{}).Run(context.Background(), newTask("exec", in))
	require.NoError(t, err)
	var got string
	require.NoError(t, json.Unmarshal(out, &got), "result %s", out)
	// Input env cannot forge the epoch; the worker's own env is inherited.
	assert.Equal(t, "r1 n1 2 7 r1/n1@7/abc bar|"+os.Getenv("PATH"), got)
}

func TestExecRunsInDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, err := kinds.Exec(kinds.ExecOptions{}).Run(context.Background(),
		newTask("exec", execInput(t, "pwd -P", "", map[string]any{"dir": dir})))
	require.NoError(t, err)
	real, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	assert.Equal(t, strconv.Quote(real), string(out))
}

func TestExecProgressLinesUpdateTheTaskAndStayOutOfTheResult(t *testing.T) {
	t.Parallel()
	gate := filepath.Join(t.TempDir(), "go")
	task := newTask("exec", execInput(t, `
		echo '::progress 40'
		while [ ! -e "$1" ]; do sleep 0.01; done
		echo '  ::progress 62.5 '
		echo '::progress soon'
		echo '{"ok": true, "n": 3}'`, gate, nil))
	res := runAsync(context.Background(), kinds.Exec(kinds.ExecOptions{}), task)

	// Progress is reported while the command runs, not after.
	require.Eventually(t, func() bool { return task.Progress() == 40 }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	r := await(t, res)
	require.NoError(t, r.err)
	assert.Equal(t, 62, task.Progress())
	// A malformed directive is output, so this is text, not JSON.
	assert.Equal(t, strconv.Quote("::progress soon\n{\"ok\": true, \"n\": 3}"), string(r.out))
}

func TestExecKeepsJSONStdoutAsJSON(t *testing.T) {
	t.Parallel()
	task := newTask("exec", execInput(t, `echo '::progress 99'; echo '  {"ok": true, "n": [1, 2]}  '`, "", nil))
	out, err := kinds.Exec(kinds.ExecOptions{}).Run(context.Background(), task)
	require.NoError(t, err)
	assert.JSONEq(t, `{"ok": true, "n": [1, 2]}`, string(out))
	assert.True(t, json.Valid(out))
	assert.Equal(t, 99, task.Progress())
}

func TestExecTextStdoutBecomesATrimmedString(t *testing.T) {
	t.Parallel()
	for script, want := range map[string]string{
		`printf '  deployed v2 \n\n'`: `"deployed v2"`,
		`true`:                        `null`,
	} {
		out, err := kinds.Exec(kinds.ExecOptions{}).Run(context.Background(), newTask("exec", execInput(t, script, "", nil)))
		require.NoError(t, err, script)
		assert.Equal(t, want, string(out), script)
	}
}

func TestExecKeepsTheTailOfLongOutput(t *testing.T) {
	t.Parallel()
	out, err := kinds.Exec(kinds.ExecOptions{}).Run(context.Background(), newTask("exec",
		execInput(t, `head -c 200000 /dev/zero | tr '\0' a; echo; echo '::progress 50'; echo END`, "", nil)))
	require.NoError(t, err)
	var s string
	require.NoError(t, json.Unmarshal(out, &s))
	assert.True(t, strings.HasPrefix(s, "[... "), "result starts %q", s[:min(len(s), 40)])
	assert.True(t, strings.HasSuffix(s, "aaa\nEND"), "result ends %q", s[max(0, len(s)-40):])
	assert.Less(t, len(s), 64<<10+100)
	assert.Greater(t, len(s), 60<<10)
}

func TestExecNonZeroExitIsARetryableErrorWithCodeAndStderr(t *testing.T) {
	t.Parallel()
	_, err := kinds.Exec(kinds.ExecOptions{}).Run(context.Background(), newTask("exec",
		execInput(t, `echo progress-so-far; echo 'disk full' >&2; exit 3`, "", nil)))
	require.Error(t, err)
	assert.False(t, runner.IsPermanent(err))
	assert.Contains(t, err.Error(), "exit code 3")
	assert.Contains(t, err.Error(), "disk full")
	var xe *kinds.ExitError
	require.ErrorAs(t, err, &xe)
	assert.Equal(t, 3, xe.Code)
	assert.Equal(t, "disk full", xe.Stderr)
}

func TestExecMalformedInputIsPermanentAndNamesTheField(t *testing.T) {
	t.Parallel()
	for input, field := range map[string]string{
		`not json`:                             "invalid character",
		`{}`:                                   `"command"`,
		`{"command":[]}`:                       `"command"`,
		`{"command":""}`:                       "command",
		`{"command":[""]}`:                     `"command"`,
		`{"comand":["ls"]}`:                    `"comand"`,
		`{"command":["ls"],"timeout":"x"}`:     "duration",
		`{"command":["ls"],"env":{"A=B":"x"}}`: `"env"`,
	} {
		_, err := kinds.Exec(kinds.ExecOptions{}).Run(context.Background(), newTask("exec", input))
		require.Error(t, err, input)
		assert.True(t, runner.IsPermanent(err), "input %s: err = %v", input, err)
		assert.Contains(t, err.Error(), field, "input %s", input)
	}
}

func TestExecMissingBinaryIsRetryable(t *testing.T) {
	t.Parallel()
	_, err := kinds.Exec(kinds.ExecOptions{}).Run(context.Background(),
		newTask("exec", `{"command":["baton-no-such-binary"]}`))
	require.Error(t, err)
	assert.False(t, runner.IsPermanent(err), "another worker may have it: %v", err)
}

func TestExecCancelKillsTheWholeProcessGroup(t *testing.T) {
	t.Parallel()
	pidfile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	res := runAsync(ctx, kinds.Exec(kinds.ExecOptions{}), newTask("exec",
		execInput(t, `sleep 300 & echo $! > "$1"; wait`, pidfile, nil)))

	grandchild := readPID(t, pidfile)
	cancel(runner.ErrRunCancelled)

	r := await(t, res)
	require.Error(t, r.err)
	assert.ErrorIs(t, r.err, runner.ErrRunCancelled)
	assert.Contains(t, r.err.Error(), "SIGTERM")
	requireGone(t, grandchild)
}

func TestExecSIGKILLsAGroupThatIgnoresSIGTERMAfterTheGrace(t *testing.T) {
	t.Parallel()
	const grace = 300 * time.Millisecond
	pidfile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	// The ignored TERM is inherited by the background child as well.
	res := runAsync(ctx, kinds.Exec(kinds.ExecOptions{KillGrace: grace}), newTask("exec",
		execInput(t, `trap '' TERM; sleep 300 & echo $! > "$1"; while :; do wait; done`, pidfile, nil)))

	grandchild := readPID(t, pidfile)
	cancelled := time.Now()
	cancel(runner.ErrLeaseLost)

	r := await(t, res)
	assert.GreaterOrEqual(t, time.Since(cancelled), grace, "SIGKILL came before the grace ran out")
	require.Error(t, r.err)
	assert.ErrorIs(t, r.err, runner.ErrLeaseLost)
	assert.Contains(t, r.err.Error(), "SIGKILL")
	requireGone(t, grandchild)
}

func TestExecInputTimeoutStopsTheCommandAndIsRetryable(t *testing.T) {
	t.Parallel()
	start := time.Now()
	_, err := kinds.Exec(kinds.ExecOptions{}).Run(context.Background(),
		newTask("exec", `{"command":["sleep","300"],"timeout":"200ms"}`))
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.False(t, runner.IsPermanent(err))
	assert.Contains(t, err.Error(), "200ms")
	assert.Less(t, time.Since(start), 5*time.Second, "the grace was not needed: sleep dies on SIGTERM")
}

func TestExecStopsWhatTheCommandLeftRunning(t *testing.T) {
	t.Parallel()
	pidfile := filepath.Join(t.TempDir(), "pid")
	// The background sleep keeps stdout open; Run must neither wait for
	// it nor let it outlive the attempt.
	out, err := kinds.Exec(kinds.ExecOptions{}).Run(context.Background(), newTask("exec",
		execInput(t, `sleep 300 & echo $! > "$1"; echo done`, pidfile, nil)))
	require.NoError(t, err)
	assert.Equal(t, `"done"`, string(out))
	requireGone(t, readPID(t, pidfile))
}

func TestExecDoesNotStartWhenAlreadyCancelled(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "ran")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(runner.ErrShutdown)
	_, err := kinds.Exec(kinds.ExecOptions{}).Run(ctx, newTask("exec", execInput(t, `touch "$1"`, marker, nil)))
	assert.ErrorIs(t, err, runner.ErrShutdown)
	assert.NoFileExists(t, marker)
}
