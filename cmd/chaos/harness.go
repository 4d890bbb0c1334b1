package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/chaos/check"
	"github.com/batonrun/baton/runner"
)

// harness is one fault run: Redis, the fleet, the downstream, the workload.
type harness struct {
	cfg    config
	log    *slog.Logger
	timing timing

	redisMu sync.Mutex // a Redis kill holds it until Redis is back
	redis   *redisProc
	runners []*runnerSlot
	down    *downstreamProc
	work    *workload
}

// runHarness runs the whole fault run and checks it. An error means the
// harness could not run; violations are in the result.
func runHarness(ctx context.Context, cfg config, log *slog.Logger) (*result, error) {
	began := time.Now()
	h := &harness{cfg: cfg, log: log, timing: defaultTiming}
	out := cfg.out
	if out == "" {
		var err error
		if out, err = os.MkdirTemp("", "baton-chaos-"); err != nil {
			return nil, err
		}
	}
	out, err := filepath.Abs(out)
	if err != nil {
		return nil, err
	}
	h.cfg.out = out
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	// Two harnesses in one out dir would share Redis's AOF and mix their
	// histories; the lock dies with the process.
	lock, err := os.OpenFile(filepath.Join(out, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return nil, fmt.Errorf("out dir %s is in use by another harness: %w", out, err)
	}
	if err := prepareOut(out); err != nil {
		return nil, err
	}
	bin := cfg.bin
	if bin == "" {
		log.Info("building", "packages", "cmd/runner examples/downstream")
		if bin, err = buildBinaries(ctx); err != nil {
			return nil, err
		}
		defer os.RemoveAll(bin)
	}
	defer h.teardown()
	if h.redis, err = startRedis(ctx, filepath.Join(out, "redis")); err != nil {
		return nil, err
	}
	if h.down, err = startDownstream(ctx, bin, h.redis.URL(), out); err != nil {
		return nil, err
	}
	var classes []int
	for i := range cfg.runners + cfg.agents {
		p, err := newProxy(h.redis.Addr())
		if err != nil {
			return nil, err
		}
		s := &runnerSlot{id: fmt.Sprintf("r%d", i+1), exe: "runner", proxy: p, bin: bin, out: out,
			timing: h.timing, log: log}
		if i >= cfg.runners { // the conversations' Go kind
			s.id, s.exe, s.class = fmt.Sprintf("a%d", i-cfg.runners+1), "agent", 1
		}
		classes = append(classes, s.class)
		h.runners = append(h.runners, s)
		if err := s.start(); err != nil {
			return nil, err
		}
	}
	for _, s := range h.runners {
		if err := waitReady(ctx, s); err != nil {
			return nil, err
		}
	}
	rdb, err := runner.OpenRedis(h.redis.URL())
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	runs := cfg.runs
	if runs == 0 {
		runs = max(int(2*cfg.duration/time.Second), 1)
	}
	if h.work, err = newWorkload(rdb, cfg.seed, runs, h.down.addr, log); err != nil {
		return nil, err
	}
	defer h.work.close()
	var conv *conversations
	if cfg.threads > 0 {
		conv = newConversations(h.work.client, cfg.seed, cfg.threads, log, h.work.addRun)
	}

	var fl *flow
	if cfg.flow >= 0 {
		n := cfg.flow
		if n == 0 {
			n = max(int(cfg.duration/(2*time.Second)), 1)
		}
		if fl, err = newFlow(h.work.client, h.redis.Addr(), cfg.seed, n, log, h.work.addRun); err != nil {
			return nil, err
		}
		defer fl.close()
		if err := fl.setLimits(ctx); err != nil {
			return nil, err
		}
	}

	sched := plan(cfg.seed, cfg.duration, classes, h.timing)
	log.Info("fault_window", "seed", cfg.seed, "duration", cfg.duration, "faults_planned", len(sched),
		"runs", runs, "runners", cfg.runners, "out", out)
	inj := &injector{h: h, log: log}
	start := time.Now()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); inj.run(ctx, start, sched) }()
	go func() { defer wg.Done(); h.work.submitAll(ctx, cfg.duration) }()
	stopSampling, stopResuming := func() {}, func() {}
	if fl != nil {
		stopResuming = fl.startResuming(ctx)
		wg.Add(2)
		go func() { defer wg.Done(); fl.submitAll(ctx, cfg.duration) }()
		go func() { defer wg.Done(); fl.changeLimits(ctx, cfg.duration) }()
	}
	if conv != nil {
		stopSampling = conv.startSampling(ctx)
		wg.Add(1)
		go func() { defer wg.Done(); conv.run(ctx, cfg.duration) }()
	}
	wg.Wait()
	select {
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	case <-time.After(time.Until(start.Add(cfg.duration))):
	}

	// Heal: every link clean, every runner running, and let the runs end.
	log.Info("healing")
	if fl != nil {
		fl.proxy.Heal()
	}
	for _, s := range h.runners {
		s.proxy.Heal()
		if err := s.ensureRunning(); err != nil {
			return nil, err
		}
	}
	settled := time.Now()
	open := h.work.waitTerminal(ctx, settled.Add(cfg.settle))
	settleTook := time.Since(settled)
	stopSampling()
	stopResuming()
	log.Info("settled", "open_runs", open, "took", settleTook.Round(time.Millisecond))

	// Drain the fleet so every history is complete, then read the outcome.
	var stop sync.WaitGroup
	for _, s := range h.runners {
		stop.Add(1)
		go func() { defer stop.Done(); s.shutdown() }()
	}
	stop.Wait()
	readCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	var threads *check.ThreadInput
	var busy []string
	if conv != nil {
		busy = conv.busyRuns()
	}
	final := h.work.final(readCtx, busy)
	h.down.stop()
	var notes []string
	if conv != nil {
		if err := conv.readFinal(readCtx); err != nil {
			notes = append(notes, "reading the threads' checkpoints at the end: "+err.Error())
		}
		threads = conv.input()
		if err := writeLines(filepath.Join(out, "threads.json"), []*check.ThreadInput{threads}); err != nil {
			return nil, err
		}
	}

	var flowIn *check.FlowInput
	if fl != nil {
		if err := fl.readEnd(readCtx); err != nil {
			notes = append(notes, "reading the limits' use at the end: "+err.Error())
		}
		flowIn = fl.input()
		if err := writeLines(filepath.Join(out, "flow.json"), []*check.FlowInput{flowIn}); err != nil {
			return nil, err
		}
	}

	faults := inj.Faults()
	if err := writeLines(filepath.Join(out, "faults.jsonl"), faults); err != nil {
		return nil, err
	}
	if err := writeLines(filepath.Join(out, "runs.jsonl"), sortedFinal(final)); err != nil {
		return nil, err
	}
	var workers []check.Worker
	for _, s := range h.runners {
		workers = append(workers, s.worker())
	}
	m := meta{Seed: cfg.seed, DurationS: cfg.duration.Seconds(), Runners: cfg.runners, Agents: cfg.agents,
		Threads: cfg.threads, Workers: workers, Submitted: h.work.Accepted(),
		Refused: h.work.Refused(), SettleMS: settleTook.Milliseconds(), ElapsedMS: time.Since(began).Milliseconds()}
	if err := writeLines(filepath.Join(out, "meta.json"), []meta{m}); err != nil {
		return nil, err
	}
	ops, err := check.ReadHistoryDir(filepath.Join(out, "history"))
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	admits, err := check.ReadAdmits(filepath.Join(out, "admits.jsonl"))
	if err != nil {
		return nil, fmt.Errorf("admit log: %w", err)
	}
	log.Info("checking", "ops", len(ops), "admits", len(admits), "runs", len(final))
	rep := check.Check(check.Input{Ops: ops, Faults: faults, Admits: admits, Submitted: h.work.Accepted(),
		SubmitRefused: h.work.Refused(),
		Runs:          final, Dependents: h.work.dependents(), OutDir: out, Threads: threads, Flow: flowIn, Workers: workers,
		Bounds: check.Bounds{LeaseTTL: h.timing.LeaseTTL, Grace: h.timing.Grace, Sweep: h.timing.Sweep, Slack: cfg.slack}})
	rep.Notes = append(rep.Notes, notes...)
	for _, s := range h.runners {
		rep.Notes = append(rep.Notes, s.exits...)
	}
	if len(ops) > 0 && !historiesCover(ops, h.runners) {
		rep.Notes = append(rep.Notes, "some runner incarnation wrote no history line")
	}
	return &result{cfg: h.cfg, report: rep, faults: faults, final: final, settle: settleTook,
		elapsed: time.Since(began)}, nil
}

// waitReady waits for a runner's first incarnation to log runner_ready, so
// that a configuration error stops the harness before any fault.
func waitReady(ctx context.Context, s *runnerSlot) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, done, src := s.current()
		b, _ := os.ReadFile(filepath.Join(s.out, "runners", src+".log"))
		if strings.Contains(string(b), "runner_ready") {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("runner %s exited at start:\n%s", src, tail(string(b), 3000))
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("runner %s not ready within 30s:\n%s", src, tail(string(b), 3000))
		}
		time.Sleep(50 * time.Millisecond) // polling a process start-up
	}
}

// historiesCover reports whether every slot's histories hold a line; a
// runner that ran nodes but never wrote one is not recording.
func historiesCover(ops []check.Op, slots []*runnerSlot) bool {
	seen := map[string]bool{}
	for _, o := range ops {
		seen[o.Worker] = true
	}
	for _, s := range slots {
		if !seen[s.id] {
			return false
		}
	}
	return true
}

// writeLines writes one JSON line per item, for a post-mortem of the run.
func writeLines[T any](path string, items []T) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, x := range items {
		if err := enc.Encode(x); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// finalRecord is one line of runs.jsonl: a run as read back, with its events.
type finalRecord struct {
	Run    *fence.RunInfo `json:"run"`
	Events []fence.Event  `json:"events"`
	Err    string         `json:"err,omitempty"`
}

func sortedFinal(final map[string]check.RunFinal) []finalRecord {
	var out []finalRecord
	for _, id := range slices.Sorted(maps.Keys(final)) {
		f := final[id]
		rec := finalRecord{Run: f.Info, Events: f.Events}
		if f.Err != nil {
			rec.Err = f.Err.Error()
		}
		out = append(out, rec)
	}
	return out
}

// teardown stops whatever is still running, whatever happened.
func (h *harness) teardown() {
	for _, s := range h.runners {
		s.mu.Lock()
		s.closing = true
		cmd, done := s.cmd, s.done
		s.mu.Unlock()
		if cmd != nil && cmd.Process != nil {
			_ = cmd.Process.Kill()
			<-done
		}
		s.proxy.Close()
	}
	if h.down != nil {
		h.down.stop()
	}
	if h.redis != nil {
		h.redis.kill()
	}
}
