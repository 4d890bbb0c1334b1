package runner

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/batonrun/baton/fence"
)

// heartbeater renews every lease this worker holds: one pipeline per tick,
// whatever their number. It cancels a handler's context with ErrLeaseLost
// when Redis refuses the renewal (fenced) or when no renewal has succeeded
// for longer than the lease can be trusted (self-fencing, measured from when
// the last successful renewal started), and with ErrRunCancelled when the
// run was cancelled: pushed (cancelRun, called by the cancelWatcher), or
// read from a renewal's reply when the push was lost.
//
// Progress does not wait for the tick: Task.SetProgress wakes the
// heartbeater, which renews early, in one pipeline, the leases whose
// progress changed, each at most once per progressEvery. The tick itself
// costs the same whether or not progress changed.
type heartbeater struct {
	store    *fence.Store
	ttl      time.Duration
	interval time.Duration
	log      *slog.Logger
	m        *Metrics
	wake     chan struct{} // a task's progress changed; buffered, never blocks a handler

	mu     sync.Mutex
	leases map[string]*active // by claim id: a worker can hold two claims of one node
	// pushed are the runs whose cancel was pushed within the last ttl, by
	// run id, so that an attempt claimed before the cancel but tracked
	// only after its push arrived is cancelled when it starts.
	pushed map[string]pushedCancel
	killed bool
	wg     sync.WaitGroup

	// The last heartbeat tick that renewed a lease, for the fleet view:
	// when it started, its round trip and the least lease time left. Guarded
	// by mu.
	renewedAt  time.Time
	lastRTT    time.Duration
	lastMargin time.Duration
	// changes counts leases added and finished, so that the advertisement
	// is refreshed at the next sweep when the running set changed. Guarded
	// by mu.
	changes uint64
}

// heartbeaterParams builds a heartbeater.
type heartbeaterParams struct {
	store    *fence.Store
	ttl      time.Duration // lease TTL
	interval time.Duration // tick; at most ttl/3
	logger   *slog.Logger
	metrics  *Metrics
}

func newHeartbeater(p heartbeaterParams) *heartbeater {
	return &heartbeater{store: p.store, ttl: p.ttl, interval: p.interval, log: p.logger, m: p.metrics,
		wake: make(chan struct{}, 1), leases: map[string]*active{}, pushed: map[string]pushedCancel{}}
}

// progressEvery is the least time between two progress renewals of one
// lease: a handler may report progress as often as it likes; Redis sees a
// few writes a second per node at most, each also renewing the lease.
const progressEvery = 250 * time.Millisecond

type pushedCancel struct {
	msg fence.CancelMessage
	at  time.Time
}

// active is one running attempt.
type active struct {
	lease  fence.Lease
	task   *Task
	cancel context.CancelCauseFunc
	// trusted is when the lease stops being trusted: the start of the last
	// successful claim or renewal + ttl - margin. The self-fence timer fires
	// then.
	trusted   time.Time
	selfFence *time.Timer
	until     time.Time // lease deadline (Redis time) as last renewed
	lost      bool      // the lease was lost or no longer trusted; guarded by heartbeater.mu
	// selfFenced: lost because no renewal was heard in time, not because
	// Redis refused one; the claim may still be current. Guarded likewise.
	selfFenced bool
	// sent is the progress last sent to Redis (-1: none) and sentAt when
	// it changed; guarded by heartbeater.mu.
	sent   int
	sentAt time.Time
}

// margin is how long before the lease's end a worker stops trusting it:
// clock rate differences and the round trip that will carry its last write.
func (h *heartbeater) margin() time.Duration { return max(h.ttl/10, 2*h.interval/3) }

// add tracks a lease claimed at claimStarted; cancel is the handler's. It
// hooks t's progress reports to the heartbeater; call it before the
// handler runs.
func (h *heartbeater) add(l fence.Lease, t *Task, claimStarted time.Time, cancel context.CancelCauseFunc) *active {
	a := &active{lease: l, task: t, cancel: cancel, until: l.Until, sent: -1}
	a.trusted = claimStarted.Add(h.ttl - h.margin())
	t.changed = h.progressChanged
	h.mu.Lock()
	a.selfFence = time.AfterFunc(time.Until(a.trusted), func() { h.lost(a, selfFencedReason) })
	h.leases[l.ClaimID] = a
	h.changes++
	// A push heard after this claim started may have been published before
	// Redis ran the claim: it came between the claim and now. One heard
	// before the claim started was published before it too, and the claim
	// found the run not cancelled (a retry of the run): it stands.
	if p, ok := h.pushed[l.Run]; ok && p.msg.Matches(l) && p.at.After(claimStarted) && time.Since(p.at) <= h.ttl {
		cancel(ErrRunCancelled)
	}
	h.mu.Unlock()
	h.m.Running.Inc()
	return a
}

// progressChanged wakes the heartbeater to send progress early. It never
// blocks: one pending wake-up covers every change made before it is seen.
func (h *heartbeater) progressChanged() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// cancelRun cancels every running attempt of the run m names with
// ErrRunCancelled, and remembers m for a lease's time (see pushed). It
// returns how many attempts it cancelled. A killed worker hears nothing.
func (h *heartbeater) cancelRun(m fence.CancelMessage) int {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.killed {
		return 0
	}
	h.forgetPushed(now)
	h.pushed[m.Run] = pushedCancel{msg: m, at: now}
	n := 0
	for _, a := range h.leases {
		if !a.lost && m.Matches(a.lease) {
			a.cancel(ErrRunCancelled)
			n++
		}
	}
	return n
}

// forgetPushed drops the pushed cancels older than a lease: no attempt
// claimed before them can still be starting. h.mu must be held.
func (h *heartbeater) forgetPushed(now time.Time) {
	for run, p := range h.pushed {
		if now.Sub(p.at) > h.ttl {
			delete(h.pushed, run)
		}
	}
}

// finish stops renewing a's lease and its self-fence timer, once its
// handler has returned and before the worker writes the outcome: a renewal
// racing with that write is neither a lost lease nor a stale write. It
// reports whether the attempt had already lost its lease (fenced or
// self-fenced): such an attempt must not write its outcome.
func (h *heartbeater) finish(a *active) (lost bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.leases[a.lease.ClaimID] != a {
		return a.lost
	}
	delete(h.leases, a.lease.ClaimID)
	h.changes++
	a.selfFence.Stop()
	h.m.Running.Dec()
	return a.lost
}

func (h *heartbeater) tracked(a *active) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.leases[a.lease.ClaimID] == a
}

// selfFencedReason is lost's reason when the worker stopped trusting a
// lease it could not renew in time.
const selfFencedReason = "self_fenced"

// wasSelfFenced reports whether a lost its lease by self-fencing only: no
// renewal was heard in time (the replies may have been lost), but Redis
// never refused one.
func (h *heartbeater) wasSelfFenced(a *active) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return a.selfFenced
}

// lost cancels a's handler with ErrLeaseLost, unless its attempt has
// finished: from then on nothing it writes is sent.
func (h *heartbeater) lost(a *active, why string) {
	h.mu.Lock()
	if h.leases[a.lease.ClaimID] != a || a.lost {
		// Finished, or lost already: the first reason stands (a
		// self-fenced attempt whose late renewal is then refused is
		// still one that stopped trusting its lease).
		h.mu.Unlock()
		return
	}
	a.lost = true
	a.selfFenced = why == selfFencedReason
	h.mu.Unlock()
	h.log.Warn("lease_lost", "run_id", a.lease.Run, "node_id", a.lease.Node, "epoch", a.lease.Epoch, "reason", why)
	a.task.tr.event("heartbeat_lost", attribute.String("baton.reason", why), attribute.Int64("baton.epoch", a.lease.Epoch))
	a.task.tr.superseded()
	a.cancel(ErrLeaseLost)
}

func (h *heartbeater) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.leases)
}

// cancelAll cancels every running handler with cause.
func (h *heartbeater) cancelAll(cause error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, a := range h.leases {
		a.cancel(cause)
	}
}

// kill stops renewing at once, as a crash would; handlers are not told.
func (h *heartbeater) kill() {
	h.mu.Lock()
	h.killed = true
	for _, a := range h.leases {
		a.selfFence.Stop()
	}
	h.mu.Unlock()
}

func (h *heartbeater) start(ctx context.Context) {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		t := time.NewTicker(h.interval)
		defer t.Stop()
		held := time.NewTimer(progressEvery) // a change held back by progressEvery is due
		held.Stop()
		defer held.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				h.tick(ctx)
				continue
			case <-h.wake:
			case <-held.C:
			}
			if wait := h.sendProgress(ctx); wait > 0 {
				held.Reset(wait)
			}
		}
	}()
}

func (h *heartbeater) wait() { h.wg.Wait() }

func (h *heartbeater) tick(ctx context.Context) {
	now := time.Now()
	h.mu.Lock()
	if h.killed {
		h.mu.Unlock()
		return
	}
	h.forgetPushed(now)
	list := make([]*active, 0, len(h.leases))
	beats := make([]fence.Beat, 0, len(h.leases))
	for _, a := range h.leases {
		p := a.task.Progress()
		if p != a.sent {
			a.sent, a.sentAt = p, now
		}
		list = append(list, a)
		beats = append(beats, fence.Beat{Lease: a.lease, Progress: p})
	}
	h.mu.Unlock()
	// A renewal that takes longer than a tick is worth nothing: the next
	// tick sends a fresh one.
	h.renew(ctx, list, beats, h.interval, false)
}

// sendProgress renews early, in one pipeline, the leases whose progress
// changed since it was last sent, each at most once per progressEvery. It
// returns how long until the first change it held back may go (0: none).
func (h *heartbeater) sendProgress(ctx context.Context) time.Duration {
	now := time.Now()
	var wait time.Duration
	var list []*active
	var beats []fence.Beat
	h.mu.Lock()
	if h.killed {
		h.mu.Unlock()
		return 0
	}
	for _, a := range h.leases {
		p := a.task.Progress()
		if p < 0 || p == a.sent || a.lost {
			continue
		}
		if d := a.sentAt.Add(progressEvery).Sub(now); d > 0 {
			if wait == 0 || d < wait {
				wait = d
			}
			continue
		}
		a.sent, a.sentAt = p, now
		list = append(list, a)
		beats = append(beats, fence.Beat{Lease: a.lease, Progress: p})
	}
	h.mu.Unlock()
	// Progress that cannot be written within a second waits for the tick,
	// which carries it too; the tick must not wait behind it.
	h.renew(ctx, list, beats, min(h.interval, time.Second), true)
	return wait
}

// renew sends beats (beats[i] renews list[i]) in one pipeline bounded by
// timeout and applies the outcomes: a new deadline and trust, a lost lease,
// or a cancelled run. An early renewal (progress) that fails is left to the
// tick, which reports failures.
func (h *heartbeater) renew(ctx context.Context, list []*active, beats []fence.Beat, timeout time.Duration, early bool) {
	if len(beats) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	started := time.Now()
	renewals, errs := h.store.HeartbeatBatch(rctx, beats, h.ttl)
	rtt := time.Since(started)
	h.m.HeartbeatRTT.Observe(rtt.Seconds())
	margin := time.Duration(-1)
	defer func() {
		if margin >= 0 && !early {
			h.mu.Lock()
			h.renewedAt, h.lastRTT, h.lastMargin = started, rtt, margin
			h.mu.Unlock()
		}
	}()
	for i, a := range list {
		err := errs[i]
		if !h.tracked(a) {
			// The handler returned while the renewal was in flight. finish
			// untracked it before the outcome was written, so a refusal
			// here (the node is no longer RUNNING) is its own commit.
			continue
		}
		switch {
		case err == nil:
			r := renewals[i]
			left := a.until.Sub(r.Until.Add(-h.ttl)) // old deadline - Redis now
			h.m.LeaseLeft.Observe(max(left, 0).Seconds())
			if margin < 0 || left < margin {
				margin = max(left, 0)
			}
			if left < h.ttl/3 {
				h.log.Warn("lease_nearly_expired", "run_id", a.lease.Run, "node_id", a.lease.Node,
					"epoch", a.lease.Epoch, "left", left)
			}
			h.mu.Lock()
			a.until = r.Until
			a.trusted = started.Add(h.ttl - h.margin())
			a.selfFence.Reset(time.Until(a.trusted))
			h.mu.Unlock()
			if r.Cancelled {
				a.cancel(ErrRunCancelled)
			}
		case fence.IsFenced(err):
			h.m.StaleRejected.WithLabelValues("heartbeat").Inc()
			h.lost(a, err.Error())
		default:
			// Redis unreachable: keep trying on the next tick; the
			// self-fence timer ends the attempt if that goes on too long.
			if ctx.Err() == nil && !early {
				h.log.Warn("heartbeat_failed", "run_id", a.lease.Run, "node_id", a.lease.Node,
					"epoch", a.lease.Epoch, "err", err)
			}
		}
	}
}

// leaseChanges counts the leases added and finished so far.
func (h *heartbeater) leaseChanges() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changes
}

// health is what the runner advertises about its leases (fence.WorkerHealth):
// the attempts it holds, the earliest deadline among them, and the last
// tick's round trip and margin; and the count of lease changes so far.
func (h *heartbeater) health() (*fence.WorkerHealth, uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := &fence.WorkerHealth{Running: []fence.RunningNode{}, RenewedAt: h.renewedAt,
		RTTMs: float64(h.lastRTT.Microseconds()) / 1000, MarginMs: h.lastMargin.Milliseconds()}
	for _, a := range h.leases {
		if a.lost {
			continue
		}
		out.Running = append(out.Running, fence.RunningNode{Run: a.lease.Run, Node: a.lease.Node, Epoch: a.lease.Epoch})
		if out.LeaseUntil.IsZero() || a.until.Before(out.LeaseUntil) {
			out.LeaseUntil = a.until
		}
	}
	slices.SortFunc(out.Running, func(x, y fence.RunningNode) int {
		return cmp.Or(strings.Compare(x.Run, y.Run), strings.Compare(x.Node, y.Node))
	})
	return out, h.changes
}
