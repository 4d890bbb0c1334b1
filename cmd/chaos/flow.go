package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/chaos/check"
	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/spec"
)

// The limits the flow workload names: one slot, three slots, and a rate
// (4 a second, 2 more at once) whose period divides into whole
// milliseconds, so that the checker's bound is exact.
var flowLimits = []fence.Limit{
	{Name: "chaos-one", Concurrency: 1},
	{Name: "chaos-three", Concurrency: 3},
	{Name: "chaos-rate", Rate: 4, Period: time.Second, Burst: 2},
}

// parkCommand parks its node on its first attempt (::wait) and, on the
// attempt after a resume, commits the answer it read and the wait it
// answered, so that the checker sees which value each wait's node
// consumed.
var parkCommand = []string{"sh", "-c", `if [ -n "$BATON_RESUME_FILE" ]; then ` +
	`printf '{"answer":%s,"wait":"%s"}' "$(cat "$BATON_RESUME_FILE")" "$BATON_RESUME_WAIT_ID"; ` +
	`else sleep 0.1; echo '::wait {"ask":"chaos"}'; fi`}

// flow is the limits-and-waits workload: runs whose nodes name the limits
// above, and runs with a node that parks, which the harness resumes as a
// person would, through the client API, while the faults run. Some
// resumes lose their reply (the resumer's own proxy drops it, the script
// having run) and are sent again with the same wait id; some are answered
// a second time with another value, which must get the first answer back.
type flow struct {
	client *runner.Client // status reads and submits, straight to Redis
	resume *runner.Client // resumes, through proxy
	rdb    redis.UniversalClient
	proxy  *proxy
	log    *slog.Logger
	specs  []*runner.RunSpec
	onRun  func(*runner.RunSpec)
	rng    *rand.Rand // the resumer's draws; only its goroutine uses it

	mu       sync.Mutex
	accepted []*runner.RunSpec
	parks    []string // run/node of the nodes that park
	uses     map[string][]string
	resumes  []check.ResumeOp
	answered map[string]bool // wait ids answered
	changes  []check.LimitSet
	end      []check.LimitEnd
	seed     uint64
}

func newFlow(client *runner.Client, redisAddr string, seed uint64, runs int, log *slog.Logger,
	onRun func(*runner.RunSpec)) (*flow, error) {
	p, err := newProxy(redisAddr)
	if err != nil {
		return nil, err
	}
	rdb, err := runner.OpenRedis("redis://" + p.Addr() + "/0")
	if err != nil {
		p.Close()
		return nil, err
	}
	rc, err := runner.NewClient(runner.ClientConfig{Redis: rdb})
	if err != nil {
		_ = rdb.Close()
		p.Close()
		return nil, err
	}
	f := &flow{client: client, resume: rc, rdb: rdb, proxy: p, log: log, onRun: onRun,
		seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0xf10)), uses: map[string][]string{}, answered: map[string]bool{}}
	rng := rand.New(rand.NewPCG(seed, seed^0x11f))
	for i := range runs {
		s := flowSpec(rng, fmt.Sprintf("chaos-%d-f%03d", seed, i))
		f.specs = append(f.specs, s)
		for _, n := range s.Nodes {
			k := s.ID + "/" + n.ID
			for _, l := range n.Limits {
				f.uses[k] = append(f.uses[k], l.Name)
			}
			if n.ID == "ask" {
				f.parks = append(f.parks, k)
			}
		}
	}
	return f, nil
}

func (f *flow) close() {
	_ = f.resume.Close()
	_ = f.rdb.Close()
	f.proxy.Close()
}

// flowSpec draws one run: a chain under the limit of one, a fan-out
// under the limit of three (some nodes also under the rate), a burst under
// the rate, or a node that parks (now and then under a concurrency limit,
// which its park frees) with a dependent.
func flowSpec(rng *rand.Rand, id string) *runner.RunSpec {
	s := &runner.RunSpec{ID: id}
	sleep := func(name string, lo, hi int, limits ...string) runner.NodeSpec {
		n := runner.NodeSpec{ID: name, Kind: "sleep", MaxAttempts: 5,
			Input: json.RawMessage(fmt.Sprintf(`{"duration":"%dms"}`, lo+rng.IntN(hi-lo)))}
		for _, l := range limits {
			n.Limits = append(n.Limits, spec.LimitUse{Name: l})
		}
		return n
	}
	switch rng.IntN(4) {
	case 0: // one at a time
		prev := ""
		for i := range 1 + rng.IntN(2) {
			n := sleep(fmt.Sprintf("o%d", i), 80, 300, "chaos-one")
			if prev != "" {
				n.Deps = []string{prev}
			}
			prev = n.ID
			s.Nodes = append(s.Nodes, n)
		}
	case 1: // three at a time
		for i := range 3 + rng.IntN(3) {
			limits := []string{"chaos-three"}
			if rng.IntN(3) == 0 {
				limits = append(limits, "chaos-rate")
			}
			s.Nodes = append(s.Nodes, sleep(fmt.Sprintf("t%d", i), 150, 700, limits...))
		}
	case 2: // a burst under the rate
		for i := range 3 + rng.IntN(4) {
			s.Nodes = append(s.Nodes, sleep(fmt.Sprintf("r%d", i), 10, 100, "chaos-rate"))
		}
	default: // a wait
		b, _ := json.Marshal(map[string]any{"command": parkCommand})
		ask := runner.NodeSpec{ID: "ask", Kind: "exec", Input: b, MaxAttempts: 5}
		switch rng.IntN(3) {
		case 0:
			ask.Limits = []spec.LimitUse{{Name: "chaos-one"}}
		case 1:
			ask.Limits = []spec.LimitUse{{Name: "chaos-three"}}
		}
		after := sleep("after", 50, 200)
		after.Deps = []string{"ask"}
		s.Nodes = append(s.Nodes, ask, after)
	}
	return s
}

// setLimits sets the limits as an operator would (enqueue limit set, PUT
// /v1/limits: the same client call), until Redis answers.
func (f *flow) setLimits(ctx context.Context) error {
	for _, l := range flowLimits {
		for {
			err := f.client.SetLimit(ctx, l)
			if err == nil {
				break
			}
			if errors.Is(err, fence.ErrInvalidData) || ctx.Err() != nil {
				return fmt.Errorf("limit %s: %w", l.Name, err)
			}
			time.Sleep(300 * time.Millisecond) // Redis is restarting
		}
	}
	return nil
}

// changeLimits lowers chaos-three to 1 for a few seconds now and then,
// and raises it back to 3, as an operator would, over the first 80% of
// the window: a claim after the lowering must fit the new limit, while
// the slots held then are kept.
func (f *flow) changeLimits(ctx context.Context, window time.Duration) {
	rng := rand.New(rand.NewPCG(f.seed, f.seed^0xc4a))
	until := time.Now().Add(window * 8 / 10)
	three := flowLimits[1]
	for ctx.Err() == nil && time.Now().Before(until) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(5000+rng.IntN(10000)) * time.Millisecond):
		}
		low := three
		low.Concurrency = 1
		f.set(ctx, low)
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(1500+rng.IntN(3500)) * time.Millisecond):
		}
		f.set(context.WithoutCancel(ctx), three)
	}
}

// set sets l until Redis answers and records the change.
func (f *flow) set(ctx context.Context, l fence.Limit) {
	c := check.LimitSet{Name: l.Name, Concurrency: l.Concurrency, Call: time.Now().UnixNano()}
	for give := time.Now().Add(30 * time.Second); ; {
		err := f.client.SetLimit(ctx, l)
		if err == nil || ctx.Err() != nil || time.Now().After(give) {
			break // a change that may not have been made is judged as in flight from here on
		}
		f.log.Warn("limit_set_retry", "limit", l.Name, "err", err)
		time.Sleep(300 * time.Millisecond) // Redis is restarting
	}
	c.Ret = time.Now().UnixNano()
	f.mu.Lock()
	f.changes = append(f.changes, c)
	f.mu.Unlock()
}

// submitAll submits the runs over the first 80% of the window; a submit
// Redis did not answer is sent again (the same spec: a no-op if stored).
func (f *flow) submitAll(ctx context.Context, window time.Duration) {
	start := time.Now()
	gap := window * 8 / 10 / time.Duration(max(len(f.specs), 1))
	for i, s := range f.specs {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(start.Add(time.Duration(i) * gap))):
		}
		for ctx.Err() == nil {
			sub, err := f.client.Submit(ctx, s)
			if err == nil || sub.RunID != "" {
				f.mu.Lock()
				f.accepted = append(f.accepted, s)
				f.mu.Unlock()
				f.onRun(s)
				break
			}
			if errors.Is(err, runner.ErrInvalidSpec) || errors.Is(err, fence.ErrRunConflict) {
				f.log.Error("flow_submit_refused", "run_id", s.ID, "err", err)
				break
			}
			f.log.Warn("submit_retry", "run_id", s.ID, "err", err)
			time.Sleep(300 * time.Millisecond) // Redis is restarting
		}
	}
}

// startResuming resumes parked nodes until the function it returns is
// called; that waits for the resumer to stop.
func (f *flow) startResuming(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); f.resumeLoop(ctx) }()
	return func() { cancel(); <-done }
}

// resumeLoop looks at the runs with a parking node a few times a second
// and answers each wait found, once per wait id.
func (f *flow) resumeLoop(ctx context.Context) {
	ended := map[string]bool{} // runs read terminal: nothing more to answer
	for ctx.Err() == nil {
		f.mu.Lock()
		var runs []string
		for _, s := range f.accepted {
			if !ended[s.ID] && slices.ContainsFunc(s.Nodes, func(n runner.NodeSpec) bool { return n.ID == "ask" }) {
				runs = append(runs, s.ID)
			}
		}
		f.mu.Unlock()
		for _, id := range runs {
			info, err := f.client.Status(ctx, id)
			if err != nil {
				continue
			}
			ended[id] = terminal(info.Status)
			for _, n := range info.Nodes {
				f.mu.Lock()
				done := n.Wait == nil || f.answered[n.Wait.ID]
				f.mu.Unlock()
				if n.State == "WAITING" && !done {
					f.answer(ctx, id, n.ID, n.Wait.ID)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(150 * time.Millisecond):
		}
	}
}

// answer resumes one wait: the first answer, its reply lost one time in
// three and sent again until it is heard; then, one time in four, a
// second person's answer, which must get the first one back.
func (f *flow) answer(ctx context.Context, run, node, wait string) {
	value := json.RawMessage(fmt.Sprintf(`{"by":"first","v":%d}`, f.rng.IntN(1000)))
	lose := f.rng.IntN(3) == 0
	why := "first"
	for ctx.Err() == nil {
		if lose {
			f.proxy.LoseReplies(200 * time.Millisecond)
			lose = false
		}
		op := f.send(ctx, run, node, wait, value, why)
		if op.Outcome != check.ResumeError {
			break
		}
		why = "retry"
		time.Sleep(100 * time.Millisecond) // the link or Redis is back soon
	}
	f.proxy.Heal()
	if f.rng.IntN(4) == 0 {
		second := json.RawMessage(fmt.Sprintf(`{"by":"second","v":%d}`, f.rng.IntN(1000)))
		for ctx.Err() == nil && f.send(ctx, run, node, wait, second, "second").Outcome == check.ResumeError {
			time.Sleep(100 * time.Millisecond)
		}
	}
	f.mu.Lock()
	f.answered[wait] = true
	f.mu.Unlock()
}

// send makes one resume call and records it.
func (f *flow) send(ctx context.Context, run, node, wait string, value json.RawMessage, why string) check.ResumeOp {
	op := check.ResumeOp{Run: run, Node: node, Wait: wait, Sent: value, Why: why, Call: time.Now().UnixNano()}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	res, err := f.resume.Resume(cctx, run, node, wait, value)
	cancel()
	op.Ret = time.Now().UnixNano()
	switch {
	case res.Answer.Wait != "" || (err == nil && res.Answer.Value != nil):
		// Answered; an error with an answer is an enqueue the sweeper repairs.
		op.Outcome, op.Answer, op.Replay = check.ResumeAnswered, res.Answer.Value, res.Replay
	case errors.Is(err, fence.ErrNotWaiting) || errors.Is(err, fence.ErrRunDone) || errors.Is(err, fence.ErrNotFound) ||
		errors.Is(err, fence.ErrInvalidData):
		op.Outcome = check.ResumeRefused
	default:
		op.Outcome = check.ResumeError
	}
	if err != nil {
		op.Err = err.Error()
	}
	if op.Outcome != check.ResumeAnswered {
		f.log.Warn("resume_not_answered", "run_id", run, "node_id", node, "wait_id", wait, "why", why, "err", err)
	}
	f.mu.Lock()
	f.resumes = append(f.resumes, op)
	f.mu.Unlock()
	return op
}

// readEnd reads each limit's use as enqueue limit list does, once every
// run ended and the fleet stopped: no slot may be held then.
func (f *flow) readEnd(ctx context.Context) error {
	states, err := f.client.Store().LimitStates(ctx)
	if err != nil {
		return err
	}
	var end []check.LimitEnd
	for _, st := range states {
		t := st.Total()
		end = append(end, check.LimitEnd{Name: st.Name, InUse: t.InUse, Waiting: t.Waiting})
	}
	f.mu.Lock()
	f.end = end
	f.mu.Unlock()
	return nil
}

// input is what the flow checks read.
func (f *flow) input() *check.FlowInput {
	f.mu.Lock()
	defer f.mu.Unlock()
	in := &check.FlowInput{Uses: f.uses, Parks: slices.Clone(f.parks), Resumes: slices.Clone(f.resumes),
		Changes: slices.Clone(f.changes), End: slices.Clone(f.end)}
	for _, l := range flowLimits {
		in.Limits = append(in.Limits, check.FlowLimit{Name: l.Name, Concurrency: l.Concurrency, Rate: l.Rate,
			PeriodMS: l.Period.Milliseconds(), Burst: l.Burst})
	}
	return in
}
