// Command demo shows, on one machine with nothing but Go, the failure baton
// exists for: a worker that is only paused, not dead, past its lease. Another
// worker takes its node over, and when the paused one wakes up its late
// write is refused and its result is never stored.
//
// It starts an in-process Redis (miniredis), the fenced downstream services
// of examples/deploy, and three workers with 2s leases, then submits the deploy DAG of
// examples/deploy. The worker that first runs the deploy node calls the
// deploy API and freezes: its Redis connection is cut and its handler stops
// the world, ignoring ctx. Once another worker has taken the node over and
// finished it, the pause ends. The timeline printed at the end is read back
// from the run's event stream.
//
//	go run ./examples/demo     (make demo)
//
// It exits 1 if the run did not succeed or the stale write was not refused.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/egress"
	"github.com/batonrun/baton/examples/deploy"
	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/kinds"
)

func main() {
	// The workers' warnings (a paused worker's refused writes, its lost
	// heartbeats: the demo's point) are held back while the timeline
	// prints, so none lands in the middle of it, and shown after it.
	var held heldLogs
	slog.SetDefault(slog.New(slog.NewTextHandler(&held, &slog.HandlerOptions{Level: slog.LevelWarn})))
	redis.SetLogger(redisLogger{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithTimeoutCause(ctx, 50*time.Second, errors.New("the demo took longer than 50s"))
	err := run(ctx, os.Stdout)
	cancel()
	stop()
	if n := held.lines(); n > 0 {
		fmt.Fprintf(os.Stderr, "\nThe workers logged %d warning lines during the demo (held back until now):\n", n)
		held.writeTo(os.Stderr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

// heldLogs keeps log lines until the timeline has printed.
type heldLogs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (h *heldLogs) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.buf.Write(p)
}

func (h *heldLogs) lines() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return bytes.Count(h.buf.Bytes(), []byte("\n"))
}

func (h *heldLogs) writeTo(w io.Writer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, _ = w.Write(h.buf.Bytes())
}

// redisLogger sends go-redis's own messages (a cut connection's pool
// errors) to slog, which holds them back with the rest.
type redisLogger struct{}

func (redisLogger) Printf(ctx context.Context, format string, v ...any) {
	slog.WarnContext(ctx, "go-redis", "msg", fmt.Sprintf(format, v...))
}

// run plays the scenario, prints its timeline and checks its outcome.
func run(ctx context.Context, out io.Writer) error {
	o, err := play(ctx, out, slog.Default())
	if err != nil {
		return err
	}
	report(out, o)
	return verify(o)
}

// runID names the demo's run; every demo starts on an empty Redis.
const runID = "deploy-demo"

// outcome is what play observed.
type outcome struct {
	Run    *fence.RunInfo
	Events []fence.Event
	Calls  []deploy.Call // what the downstream services answered
	Victim fence.Lease   // the lease the frozen worker held
	Paused [2]time.Time  // when the victim froze and thawed
	Late   int           // HTTP status the victim's token got when sent again after the takeover
}

// play runs the scenario and returns what happened.
func play(ctx context.Context, out io.Writer, log *slog.Logger) (*outcome, error) {
	mr, err := miniredis.Run()
	if err != nil {
		return nil, fmt.Errorf("start miniredis: %w", err)
	}
	defer mr.Close()
	api := deploy.NewDownstream(log)
	srv := httptest.NewServer(api)
	defer srv.Close()
	spec, err := deploySpec(srv.URL)
	if err != nil {
		return nil, err
	}

	st := newStage()
	fl := &fleet{stage: st}
	defer fl.stop()
	for i := 1; i <= 3; i++ {
		if err := fl.start(ctx, "worker-"+strconv.Itoa(i), mr.Addr(), log); err != nil {
			return nil, err
		}
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	client, err := runner.NewClient(runner.ClientConfig{Redis: rdb})
	if err != nil {
		return nil, err
	}
	defer client.Close()

	if _, err := client.Submit(ctx, spec); err != nil {
		return nil, fmt.Errorf("submit: %w", err)
	}
	fmt.Fprintf(out, "Submitted run %s (build -> test -> migrate -> deploy -> notify) to 3 workers; leases last %s.\n",
		runID, leaseTTL)

	// 1. The first owner of deploy calls the deploy API and freezes.
	var victim fence.Lease
	select {
	case victim = <-st.frozen:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the deploy node to start: %w", context.Cause(ctx))
	}
	fmt.Fprintf(out, "%s holds deploy (epoch %d), called the deploy API and froze: Redis cut off, handler stopped.\n",
		victim.Owner, victim.Epoch)

	// 2. Its lease runs out; another worker takes deploy over and finishes it.
	var successor string
	err = waitFor(ctx, "another worker to finish deploy", func() (bool, error) {
		info, err := client.Status(ctx, runID)
		if err != nil {
			return false, err
		}
		n := nodeOf(info, "deploy")
		successor = n.Owner
		return n.State == "SUCCEEDED", nil
	})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "%s took deploy over and committed it. Ending %s's pause...\n", successor, victim.Owner)

	// 3. The pause ends: the victim's late write reaches Redis. Its worker
	// stopped trusting the lease during the pause, so it commits nothing and
	// hands the node back under its old epoch; a worker whose own timer was
	// paused too would send its commit instead. Either write is refused.
	fl.member(victim.Owner).net.heal()
	st.thaw()
	err = waitFor(ctx, "the paused worker's late write", func() (bool, error) {
		evs, err := client.Events(ctx, runID, "", 0)
		return slices.ContainsFunc(evs, func(e fence.Event) bool { return isLateWrite(e, victim) }), err
	})
	if err != nil {
		return nil, err
	}
	// 4. Its token, sent to the deploy API again now, is refused there too.
	late, err := sendLate(ctx, srv.URL+"/deploy", victim.Token())
	if err != nil {
		return nil, err
	}

	info, err := waitRun(ctx, client, runID)
	if err != nil {
		return nil, err
	}
	fl.stop()
	evs, err := client.Events(ctx, runID, "", 0)
	if err != nil {
		return nil, err
	}
	st.mu.Lock()
	paused := [2]time.Time{st.frozeAt, st.thawAt}
	st.mu.Unlock()
	return &outcome{Run: info, Events: evs, Calls: api.Calls(), Victim: victim, Paused: paused, Late: late}, nil
}

// deploySpec is examples/deploy/run.json with its http nodes pointed at the
// demo's downstream and its deploy node run by deployStep, which makes the
// deploy call over HTTP (fenced by the downstream) and can be frozen.
func deploySpec(downstreamURL string) (*runner.RunSpec, error) {
	raw := bytes.ReplaceAll(deploy.RunJSON, []byte(deploy.DownstreamURL), []byte(downstreamURL))
	spec, err := runner.ParseSpec(raw)
	if err != nil {
		return nil, fmt.Errorf("examples/deploy/run.json: %w", err)
	}
	spec.ID = runID
	i := slices.IndexFunc(spec.Nodes, func(n runner.NodeSpec) bool { return n.ID == "deploy" })
	if i < 0 {
		return nil, errors.New("examples/deploy/run.json: no deploy node")
	}
	spec.Nodes[i].Kind = "deploy-step"
	spec.Nodes[i].Input = json.RawMessage(fmt.Sprintf(`{"url": %q, "body": {"release": "app-1.4.2"}}`,
		downstreamURL+"/deploy"))
	return spec, nil
}

// Worker timings: short enough to watch a lease run out in seconds.
const (
	leaseTTL          = 2 * time.Second
	heartbeatInterval = 500 * time.Millisecond
)

// member is one worker with a Redis client of its own, as if it were its
// own process on its own host.
type member struct {
	id  string
	net *partition
	rdb *redis.Client
	w   *runner.Worker
}

// fleet is the demo's three workers.
type fleet struct {
	stage   *stage
	members []*member
}

func (f *fleet) start(ctx context.Context, id, addr string, log *slog.Logger) error {
	m := &member{id: id, net: &partition{}, rdb: redis.NewClient(&redis.Options{Addr: addr})}
	m.rdb.AddHook(m.net)
	w, err := runner.NewWorker(runner.WorkerConfig{
		Redis: m.rdb, ID: id, Concurrency: 4,
		LeaseTTL: leaseTTL, HeartbeatInterval: heartbeatInterval, Grace: 300 * time.Millisecond,
		SweepInterval: 200 * time.Millisecond, PollInterval: 20 * time.Millisecond,
		RetryBase: 100 * time.Millisecond, RetryMax: time.Second, ShutdownTimeout: 3 * time.Second,
		Logger: log,
	})
	if err != nil {
		_ = m.rdb.Close()
		return err
	}
	// The demo's deploy API is an httptest server on loopback, which the
	// http kind refuses unless allowed, as a runner's EGRESS_ALLOW does.
	local, _ := egress.Parse("EGRESS_ALLOW", "127.0.0.1") // a valid entry
	kinds.RegisterStockOnly(w, kinds.Stock{HTTP: kinds.HTTPOptions{Egress: local}}, nil)
	w.Register("deploy-step", &deployStep{call: kinds.HTTPWith(kinds.HTTPOptions{Egress: local}), net: m.net, stage: f.stage})
	if err := w.Start(ctx); err != nil {
		_ = m.rdb.Close()
		return fmt.Errorf("start %s: %w", id, err)
	}
	m.w = w
	f.members = append(f.members, m)
	return nil
}

func (f *fleet) member(id string) *member {
	for _, m := range f.members {
		if m.id == id {
			return m
		}
	}
	return &member{net: &partition{}} // unknown: nothing to heal
}

// stop ends every pause and partition, then shuts the workers down
// together. It is idempotent.
func (f *fleet) stop() {
	for _, m := range f.members {
		m.net.heal()
	}
	f.stage.thaw()
	var wg sync.WaitGroup
	for _, m := range f.members {
		wg.Go(m.w.Shutdown)
	}
	wg.Wait()
	for _, m := range f.members {
		_ = m.rdb.Close()
	}
	f.members = nil
}

// sendLate sends the deploy call again under tok, as the paused worker
// would if it retried its side effect now, and returns the HTTP status.
func sendLate(ctx context.Context, url string, tok fence.Token) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(`{"release":"app-1.4.2"}`)))
	if err != nil {
		return 0, err
	}
	req.Header.Set(fence.HeaderFencingToken, tok.String())
	req.Header.Set(kinds.HeaderEpoch, strconv.FormatInt(tok.Epoch, 10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("late deploy call: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// isLateWrite: the paused worker's commit or release of the node under its
// old epoch, refused.
func isLateWrite(e fence.Event, victim fence.Lease) bool {
	return e.Type == "stale_rejected" && e.Node == victim.Node && e.Worker == victim.Owner &&
		e.Epoch == victim.Epoch && (e.Details["op"] == "commit" || e.Details["op"] == "release")
}

func nodeOf(info *fence.RunInfo, id string) fence.NodeInfo {
	for _, n := range info.Nodes {
		if n.ID == id {
			return n
		}
	}
	return fence.NodeInfo{ID: id}
}

func waitRun(ctx context.Context, c *runner.Client, id string) (*fence.RunInfo, error) {
	var info *fence.RunInfo
	err := waitFor(ctx, "the run to finish", func() (bool, error) {
		var err error
		info, err = c.Status(ctx, id)
		if err != nil {
			return false, err
		}
		return info.Status != "PENDING" && info.Status != "RUNNING", nil
	})
	return info, err
}

// waitFor polls the store until cond holds, cond fails, or ctx ends.
func waitFor(ctx context.Context, what string, cond func() (bool, error)) error {
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, context.Cause(ctx))
		case <-tick.C:
		}
	}
}
