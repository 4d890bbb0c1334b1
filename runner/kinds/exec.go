package kinds

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/tracing"

	"github.com/batonrun/baton/jobpolicy"
)

// ExecOptions configures the exec kind. The zero value is ready to use.
type ExecOptions struct {
	// KillGrace is how long the command's process group has between
	// SIGTERM and SIGKILL, so a command can reach a safe point (flush,
	// release a lock) before it is stopped. It applies when the attempt is
	// cancelled or times out, and to processes a command leaves behind when
	// it exits. Default (zero): 5s.
	KillGrace time.Duration
	// Logger receives warnings about stdout lines that ask for something
	// that cannot be done, such as a ::checkpoint line that is not JSON.
	// Default (nil): slog.Default().
	Logger *slog.Logger
	// RedisURL, when set, is handed to the commands StoreCommands names as
	// BATON_REDIS_URL, with Prefix as BATON_PREFIX: the worker's Redis and
	// key prefix, so the command can keep its own fenced checkpoints (a
	// LangGraph saver, see js). Such a command can do
	// anything in that Redis, to any run: name only trusted commands.
	// Default (empty): no command gets either.
	RedisURL string
	// StoreCommands are the commands (argv0, exactly as a spec writes it)
	// that get RedisURL; "*" names every command. Default (nil): none.
	StoreCommands []string
	// Prefix is baton's key prefix (the runner's BATON_PREFIX). Default
	// (empty): "baton".
	Prefix string
	// Env names the worker's variables a command gets besides PATH, HOME,
	// LANG and TZ; one ending in "*" names every variable it starts. The
	// rest of the worker's environment (its API token, webhook secret,
	// Redis URL and password) is never passed. Default (nil): none.
	Env []string
	// EnvRefs names the worker's variables an input may read with
	// {"$env": NAME} (one ending in "*" names a prefix). Default (nil):
	// none; such a reference fails the node, naming EXEC_ENV_REFS.
	EnvRefs []string
	// FileDirs are the absolute directories under which {"$file": PATH}
	// may read a regular file. Default (nil): none.
	FileDirs []string
	// FileMaxBytes caps what one $file reads. Default (zero): 64 KiB.
	FileMaxBytes int64
	// FileTimeout bounds reading one $file. Default (zero): 5s.
	FileTimeout time.Duration
	// Redact holds the operator's secrets, redacted from every result and
	// error the kind returns, beside the values of the attempt's own $env
	// and $file references, which always are. Default (nil): those only.
	Redact *Redactor
}

// execBaseEnv are the worker's variables every command gets when set.
var execBaseEnv = []string{"PATH", "HOME", "LANG", "TZ"}

// Caps on what the exec kind keeps of a command's output.
const (
	// execMaxResult is how much stdout is kept for the result: the tail,
	// where commands print their summary. Longer output becomes a JSON
	// string led by a "[... N bytes dropped]" line.
	execMaxResult = 64 << 10
	// execMaxStderr is how much of stderr's tail goes into an error.
	execMaxStderr = 4 << 10
	// execDrain bounds reading output once the process group is gone. Only
	// a process that left the group (setsid) can still hold the pipes.
	execDrain = time.Second
	// execPoll is how often a stopping process group is checked for
	// survivors; Linux offers no wait on a whole group that is not ours.
	execPoll = 20 * time.Millisecond
)

// Exec returns a kind that runs a command. It is the stock way to run
// anything that is not Go, and it hands the lease's fencing token to the
// command (BATON_FENCING_TOKEN) so the command can fence its own side
// effects.
//
// Input: {"command": ["argv0", "arg", ...], "env": {"K": "V"}, "dir":
// "path", "timeout": "30s"}; command is required and is not run through a
// shell. An env value may instead be {"$env": "NAME"} or {"$file":
// "/path"}: the worker's own variable NAME or a regular file on the worker,
// read at the start of each attempt, so that a credential is never stored
// with the run (see envValue); each reads only what the operator allows
// (ExecOptions.EnvRefs, FileDirs), and the values are redacted from the
// attempt's result and error. The child's environment is an allow-list:
// the worker's PATH, HOME, LANG and TZ and the variables ExecOptions.Env
// names, then the input's env, then BATON_RUN_ID, BATON_NODE_ID,
// BATON_ATTEMPT, BATON_EPOCH, BATON_FENCING_TOKEN, BATON_WORKER_ID (the
// lease's owner), BATON_CLAIM_ID, BATON_THREAD_ID, BATON_CHECKPOINT_FILE,
// BATON_DEPS_FILE and, for a command ExecOptions.StoreCommands names,
// BATON_REDIS_URL, BATON_PREFIX, BATON_NODE_KEY and BATON_RUN_KEY, which
// input env cannot override. Nothing else of the worker's environment (its
// API token, webhook secret, Redis URL or password) reaches a command.
// Stdin is empty.
//
// The lease: a command's worker may be paused (SIGSTOP, a frozen VM) while
// the command runs on; no signal from the worker can reach it then. A
// command that must not work on once its lease is gone reads its node:
// HMGET BATON_NODE_KEY state epoch claim lease_until, HGET BATON_RUN_KEY
// cancel, and TIME, about once per heartbeat interval. The lease is gone
// when state is not RUNNING, epoch or claim differ from BATON_EPOCH and
// BATON_CLAIM_ID, cancel is "1", or lease_until (ms) is not after TIME.
// It then exits ExitLeaseLost (75), which is recorded as a lost attempt
// (abandoned, not a failure of the node), as is exit 75 after a write the
// store refused.
//
// BATON_DEPS_FILE names a JSON file {"dep-id": result, ...} with the
// committed results of the node's direct dependencies ({} for a node
// without any); it is removed after the attempt.
//
// Stdout lines "::progress N" (N in 0-100) report progress and are left
// out of the result; the rest of stdout (its last 64 KiB) is the result.
// Lines "::spend N" are left out too: each reports N units of cost (a
// model's tokens) as runner.Task.Spend does, added up over the attempt;
// one whose N is not a whole number from 0 to 2^40 is logged and ignored.
// Lines "::checkpoint {json}" are left out too: each saves the JSON as the
// newest checkpoint of the node's thread (BATON_THREAD_ID) in the
// namespace of the node's id, before the next line is read. Every attempt
// of a node that has one finds the newest in the file BATON_CHECKPOINT_FILE
// names, so it resumes where the previous attempt stopped. A line that is
// not JSON is logged and skipped; a save the store refuses (the node was
// taken over) stops the command as a lost lease does.
// A line "::wait {json}" asks for a person or an outside event: when the
// command exits 0, its node is parked (runner.Park) with the JSON as the
// wait's request instead of committed, and the attempt after a resume finds
// the resume's value in the file BATON_RESUME_FILE names. A ::wait line
// that is not JSON fails the node, saying so.
// A non-zero exit is an *ExitError, retried while attempts remain.
//
// The command runs in its own process group, and nothing in that group
// outlives the attempt: on cancellation (user, lease lost, shutdown,
// timeout) the group gets SIGTERM, then SIGKILL after KillGrace, and Run
// returns an error wrapping context.Cause; when the command exits, what it
// left running in its group is stopped the same way. A process that must
// outlive its node has to leave the group itself (setsid), and then runs
// unfenced.
func Exec(opts ExecOptions) runner.Kind {
	k := &execKind{grace: cmp.Or(max(opts.KillGrace, 0), 5*time.Second), log: cmp.Or(opts.Logger, slog.Default()),
		pass: slices.Concat(execBaseEnv, opts.Env), refs: newRefs(opts), redact: opts.Redact}
	if opts.RedisURL != "" && len(opts.StoreCommands) > 0 {
		k.prefix = cmp.Or(opts.Prefix, "baton")
		k.store = []string{"BATON_REDIS_URL=" + opts.RedisURL, "BATON_PREFIX=" + k.prefix}
		k.storeFor = slices.Clone(opts.StoreCommands)
	}
	return k
}

func newRefs(opts ExecOptions) *refs {
	return &refs{rules: jobpolicy.Rules{EnvRefs: opts.EnvRefs, FileDirs: opts.FileDirs},
		fileDirs: jobpolicy.Dirs(opts.FileDirs), fileMax: cmp.Or(opts.FileMaxBytes, execSecretMax),
		fileWait: cmp.Or(opts.FileTimeout, execFileTimeout)}
}

type execKind struct {
	grace    time.Duration
	log      *slog.Logger
	store    []string // BATON_REDIS_URL and BATON_PREFIX, when the options set them
	storeFor []string // the commands that get store
	prefix   string   // the store's key prefix, when store is set
	pass     []string // the worker's variables passed on
	refs     *refs
	redact   *Redactor
}

// trusted reports whether the command argv0 gets the store.
func (k *execKind) trusted(argv0 string) bool {
	return k.store != nil && (slices.Contains(k.storeFor, "*") || slices.Contains(k.storeFor, argv0))
}

type execInput struct {
	Command []string            `json:"command"`
	Env     map[string]envValue `json:"env"`
	Dir     string              `json:"dir"`
	Timeout duration            `json:"timeout"`
}

// ExitError is a command that ran and failed. It is exported so a program
// wrapping the exec kind can tell exit codes apart (errors.As), e.g. to
// make a "bad usage" code Permanent.
type ExitError struct {
	// Code is the exit status, or -1 when a signal ended the command.
	Code int
	// Signal is the signal that ended the command, or 0.
	Signal syscall.Signal
	// Stderr is the tail of the command's stderr (at most 4 KiB), trimmed.
	Stderr string
}

// Error says how the command ended and what it last wrote to stderr,
// which is usually why.
func (e *ExitError) Error() string {
	var s string
	if e.Signal != 0 {
		s = "killed by signal " + e.Signal.String()
	} else {
		s = "exit code " + strconv.Itoa(e.Code)
	}
	if e.Stderr != "" {
		s += ": " + e.Stderr
	}
	return s
}

func (k *execKind) Run(ctx context.Context, t *runner.Task) (json.RawMessage, error) {
	var secrets []string
	out, err := k.run(ctx, t, &secrets)
	red := k.redact.With(secrets...)
	return red.JSON(out), red.Error(err)
}

// run is Run; secrets receives the values the attempt's references
// resolved to, for Run to redact.
func (k *execKind) run(ctx context.Context, t *runner.Task, secrets *[]string) (json.RawMessage, error) {
	var in execInput
	if err := decodeInput("exec", t.Input, &in); err != nil {
		return nil, err
	}
	if len(in.Command) == 0 {
		return nil, permanentf("exec", "command", "required: a non-empty array, [argv0, arg, ...]")
	}
	if in.Command[0] == "" {
		return nil, permanentf("exec", "command", "argv0 is empty")
	}
	var store []string
	if k.trusted(in.Command[0]) {
		store = append(slices.Clip(k.store), watchEnv(t, k.prefix)...)
	}
	env, err := k.execEnv(ctx, in.Env, t, append(slices.Clip(store), traceEnv(ctx)...), secrets)
	if err != nil {
		return nil, err
	}
	lostAfter := lostWait(t.Lease) // measured before the command runs
	name := in.Command[0]
	if err := context.Cause(ctx); err != nil {
		return nil, fmt.Errorf("exec %s: not started: %w", name, err)
	}
	env, cleanup, err := checkpointEnv(ctx, t, env)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	env, cleanDeps, err := depsEnv(t, env)
	if err != nil {
		return nil, err
	}
	defer cleanDeps()
	env, cleanResume, err := resumeEnv(t, env)
	if err != nil {
		return nil, err
	}
	defer cleanResume()
	if in.Timeout > 0 {
		d := time.Duration(in.Timeout)
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, d,
			fmt.Errorf("input timeout %s: %w", d, context.DeadlineExceeded))
		defer cancel()
	}

	// Our own pipes, not exec's copying goroutines: Wait then returns when
	// the command exits, not when the last process holding stdout does.
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("exec %s: %w", name, err)
	}
	defer outR.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		outW.Close()
		return nil, fmt.Errorf("exec %s: %w", name, err)
	}
	defer errR.Close()

	cmd := exec.Command(name, in.Command[1:]...)
	cmd.Dir = in.Dir
	cmd.Env = env
	cmd.Stdout = outW
	cmd.Stderr = errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		// Retryable: another worker may have the binary or the directory.
		return nil, fmt.Errorf("exec %s: %w", name, err)
	}
	pgid := cmd.Process.Pid // Setpgid: the group is named after its leader

	stdout := &stdoutSink{task: t, log: k.log, tail: tailBuffer{max: execMaxResult}, ckpt: newCheckpointLines(ctx, t, k.log)}
	stderr := &tailBuffer{max: execMaxStderr}
	var readers sync.WaitGroup
	readers.Go(func() { stdout.readFrom(outR) })
	readers.Go(func() { _, _ = io.Copy(stderr, errR) })

	// The watcher stops the group when ctx ends while the leader runs.
	exited := make(chan struct{})
	watched := make(chan struct{})
	var termAt time.Time // set by the watcher; read after watched closes
	var killed bool
	go func() {
		defer close(watched)
		select {
		case <-exited:
			return
		case <-ctx.Done():
		}
		termAt = time.Now()
		signalGroup(pgid, syscall.SIGTERM)
		grace := time.NewTimer(k.grace)
		defer grace.Stop()
		select {
		case <-exited:
		case <-grace.C:
			killed = true
			signalGroup(pgid, syscall.SIGKILL)
		}
	}()
	waitErr := cmd.Wait()
	close(exited)
	<-watched
	if k.stopGroup(pgid, termAt) {
		killed = true
	}

	// Every process of the group is gone, so the pipes are closed unless a
	// process left the group holding them; stop reading after execDrain.
	drained := make(chan struct{})
	go func() { readers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-stdout.ckpt.drainTimeout(execDrain, drained):
		outR.Close()
		errR.Close()
		<-drained
	}

	if !termAt.IsZero() {
		how := "stopped with SIGTERM"
		if killed {
			how = fmt.Sprintf("killed with SIGKILL after %s grace", k.grace)
		}
		return nil, fmt.Errorf("exec %s: %s: %w", name, how, context.Cause(ctx))
	}
	if waitErr != nil {
		var ee *exec.ExitError
		if !errors.As(waitErr, &ee) {
			return nil, fmt.Errorf("exec %s: %w", name, waitErr)
		}
		xe := &ExitError{Code: ee.ExitCode()}
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			xe.Signal = ws.Signal()
		}
		tail, dropped := stderr.Bytes()
		xe.Stderr = strings.ToValidUTF8(string(bytes.TrimSpace(tail)), "?")
		if dropped > 0 {
			xe.Stderr = "..." + xe.Stderr
		}
		if xe.Code == ExitLeaseLost {
			return nil, leaseLostExit(ctx, name, lostAfter, xe)
		}
		return nil, fmt.Errorf("exec %s: %w", name, xe)
	}
	switch {
	case stdout.waitErr != nil:
		return nil, runner.Permanent(fmt.Errorf("exec %s: %w", name, stdout.waitErr))
	case stdout.wait != nil:
		return nil, runner.Park(runner.Wait{Request: stdout.wait})
	}
	tail, dropped := stdout.tail.Bytes()
	if dropped > 0 {
		return textResult(fmt.Sprintf("[... %d bytes dropped]\n%s", dropped, bytes.TrimSpace(tail))), nil
	}
	return result(tail), nil
}

// traceEnv hands the attempt's span to the command as TRACEPARENT and
// TRACESTATE (the environment-variable carriers of the W3C trace
// context), so that an instrumented child's spans are the node span's
// children. None while tracing is off.
func traceEnv(ctx context.Context) []string {
	if !tracing.Enabled() {
		return nil
	}
	tp, ts := tracing.Headers(ctx)
	if tp == "" {
		return nil
	}
	env := []string{"TRACEPARENT=" + tp}
	if ts != "" {
		env = append(env, "TRACESTATE="+ts)
	}
	return env
}

// execEnv is the worker's variables that k passes on, then the input's,
// then the lease's and the store's. secrets receives what references
// resolved to.
func (k *execKind) execEnv(ctx context.Context, in map[string]envValue, t *runner.Task, store []string, secrets *[]string) ([]string, error) {
	env := passEnv(k.pass)
	for _, key := range slices.Sorted(maps.Keys(in)) {
		if key == "" || strings.ContainsAny(key, "=\x00") {
			return nil, permanentf("exec", "env", "%q is not a valid variable", key)
		}
		v, err := in[key].resolve(ctx, key, k.refs)
		if err != nil {
			return nil, err
		}
		if in[key].Literal == "" {
			*secrets = append(*secrets, v)
		}
		env = append(env, key+"="+v)
	}
	l := t.Lease
	return append(append(env,
		"BATON_RUN_ID="+l.Run,
		"BATON_NODE_ID="+l.Node,
		"BATON_ATTEMPT="+strconv.FormatInt(l.Attempt, 10),
		"BATON_EPOCH="+strconv.FormatInt(l.Epoch, 10),
		"BATON_FENCING_TOKEN="+t.Token().String(),
		"BATON_CLAIM_ID="+l.ClaimID,
		"BATON_WORKER_ID="+l.Owner,
	), store...), nil // exec keeps the last value of a duplicated name
}

// envNamed reports whether names holds name, or a prefix of it ending
// in "*".
// PassEnv returns the runner's variables a job it starts may see: PATH,
// HOME, LANG and TZ, and those that names lists (NAME, or PREFIX_* for
// every variable starting so; the operator's EXEC_ENV). Everything else
// of the runner's environment (its token, its Redis credentials, its
// webhook secret) stays with the runner. The exec kind and the graph
// workers both build their children's environment from it.
func PassEnv(names []string) []string { return passEnv(slices.Concat(execBaseEnv, names)) }

func passEnv(pass []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if envNamed(pass, name) {
			env = append(env, kv)
		}
	}
	return env
}

func envNamed(names []string, name string) bool { return jobpolicy.EnvNamed(names, name) }

// stopGroup stops what is left of the group once its leader has exited:
// SIGTERM (unless the watcher sent it at termAt), then SIGKILL when the
// grace runs out. It reports whether SIGKILL was needed.
func (k *execKind) stopGroup(pgid int, termAt time.Time) bool {
	if !groupAlive(pgid) {
		return false
	}
	if termAt.IsZero() {
		termAt = time.Now()
		signalGroup(pgid, syscall.SIGTERM)
	}
	grace := time.NewTimer(time.Until(termAt.Add(k.grace)))
	defer grace.Stop()
	poll := time.NewTicker(execPoll)
	defer poll.Stop()
	for groupAlive(pgid) {
		select {
		case <-poll.C:
		case <-grace.C:
			signalGroup(pgid, syscall.SIGKILL)
			return true
		}
	}
	return false
}

func signalGroup(pgid int, sig syscall.Signal) { _ = syscall.Kill(-pgid, sig) }

// groupAlive reports whether a live process of the group remains. Zombies
// do not count: an orphan's zombie lingers for as long as PID 1 leaves it
// unreaped, which is forever when PID 1 is a worker that does not reap
// (a container started as CMD ["runner"]). Without /proc, a zombie counts.
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	alive, ok := liveInGroup(pgid)
	return alive || !ok
}

// liveInGroup scans /proc for a process of group pgid that is not a zombie;
// ok is false when /proc cannot be read.
func liveInGroup(pgid int) (alive, ok bool) {
	d, err := os.Open("/proc")
	if err != nil {
		return false, false
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return false, false
	}
	want := strconv.Itoa(pgid)
	for _, n := range names {
		if n[0] < '0' || n[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + n + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		// "pid (comm) state ppid pgrp ...": comm may hold spaces and ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) >= 3 && f[2] == want && f[0] != "Z" && f[0] != "X" {
			return true, true
		}
	}
	return false, true
}

// stdoutSink reads a command's stdout: progress lines go to the task, a
// ::wait line asks to park the node, the rest go to the result's tail.
type stdoutSink struct {
	task *runner.Task
	log  *slog.Logger
	tail tailBuffer
	ckpt *checkpointLines
	// wait is the request of the last ::wait line; waitErr what was wrong
	// with a ::wait line that was not JSON.
	wait    json.RawMessage
	waitErr error
}

func (s *stdoutSink) readFrom(r io.Reader) {
	br := bufio.NewReaderSize(r, 4096)
	midLine := false // the next fragment continues a line too long for br
	for {
		line, err := br.ReadSlice('\n')
		whole := !midLine && !errors.Is(err, bufio.ErrBufferFull)
		if s.ckpt.take(line, midLine, errors.Is(err, bufio.ErrBufferFull)) {
			// saved before the next line is read; not part of the result
		} else if p, ok := progressLine(line); whole && ok {
			s.task.SetProgress(p)
		} else if n, ok, err := spendLine(line); whole && ok {
			if err == nil {
				err = s.task.Spend(n)
			}
			if err != nil {
				// A bad report is dropped, never fatal: the claim's
				// cost stands (and what was reported before counts).
				s.log.Warn("spend_line_ignored", "run_id", s.task.Lease.Run, "node_id", s.task.Lease.Node, "err", err)
			}
		} else if req, ok, err := waitLine(line); whole && ok {
			s.wait, s.waitErr = req, err
		} else {
			_, _ = s.tail.Write(line)
		}
		midLine = errors.Is(err, bufio.ErrBufferFull)
		if err != nil && !midLine {
			return
		}
	}
}

// spendMark starts a line reporting a cost (spendLine).
const spendMark = "::spend"

// spendLine parses "::spend N": the command reports N units of cost (a
// model's tokens) for runner.Task.Spend. ok is false for any other line;
// err says what is wrong with a ::spend line whose N is not a whole
// number from 0 to 2^40.
func spendLine(line []byte) (n int64, ok bool, err error) {
	rest, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte(spendMark))
	if !ok || (len(rest) > 0 && rest[0] != ' ' && rest[0] != '\t') {
		return 0, false, nil
	}
	v := string(bytes.TrimSpace(rest))
	n, perr := strconv.ParseInt(v, 10, 64)
	if perr != nil || n < 0 || n > fence.MaxSpend {
		return 0, true, fmt.Errorf("%s line: %.40q: want a whole number from 0 to 2^40", spendMark, v)
	}
	return n, true, nil
}

// progressLine parses "::progress N" (N a number, clamped to 0-100).
func progressLine(line []byte) (int, bool) {
	rest, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("::progress"))
	if !ok || len(rest) == 0 || (rest[0] != ' ' && rest[0] != '\t') {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(bytes.TrimSpace(rest)), 64)
	if err != nil || math.IsNaN(f) {
		return 0, false
	}
	return int(max(0, min(f, 100))), true
}
