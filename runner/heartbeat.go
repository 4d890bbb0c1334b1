package runner

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/batonrun/baton/fence"
)

// heartbeater renews every lease this worker holds: one pipeline per tick,
// whatever their number. It cancels a handler's context with ErrLeaseLost
// when Redis refuses the renewal (fenced) or when no renewal has succeeded
// for longer than the lease can be trusted (self-fencing, measured from when
// the last successful renewal started), and with ErrRunCancelled when the
// run was cancelled.
type heartbeater struct {
	store    *fence.Store
	ttl      time.Duration
	interval time.Duration
	log      *slog.Logger
	m        *Metrics

	mu     sync.Mutex
	leases map[string]*active // by claim id: a worker can hold two claims of one node
	killed bool
	wg     sync.WaitGroup
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
}

// margin is how long before the lease's end a worker stops trusting it:
// clock rate differences and the round trip that will carry its last write.
func (h *heartbeater) margin() time.Duration { return max(h.ttl/10, 2*h.interval/3) }

// add tracks a lease claimed at claimStarted; cancel is the handler's.
func (h *heartbeater) add(l fence.Lease, t *Task, claimStarted time.Time, cancel context.CancelCauseFunc) *active {
	a := &active{lease: l, task: t, cancel: cancel, until: l.Until}
	a.trusted = claimStarted.Add(h.ttl - h.margin())
	h.mu.Lock()
	a.selfFence = time.AfterFunc(time.Until(a.trusted), func() { h.lost(a, "self_fenced") })
	h.leases[l.ClaimID] = a
	h.mu.Unlock()
	h.m.Running.Inc()
	return a
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
	a.selfFence.Stop()
	h.m.Running.Dec()
	return a.lost
}

func (h *heartbeater) tracked(a *active) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.leases[a.lease.ClaimID] == a
}

// lost cancels a's handler with ErrLeaseLost, unless its attempt has
// finished: from then on nothing it writes is sent.
func (h *heartbeater) lost(a *active, why string) {
	h.mu.Lock()
	if h.leases[a.lease.ClaimID] != a {
		h.mu.Unlock()
		return
	}
	a.lost = true
	h.mu.Unlock()
	h.log.Warn("lease_lost", "run_id", a.lease.Run, "node_id", a.lease.Node, "epoch", a.lease.Epoch, "reason", why)
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
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				h.tick(ctx)
			}
		}
	}()
}

func (h *heartbeater) wait() { h.wg.Wait() }

func (h *heartbeater) tick(ctx context.Context) {
	h.mu.Lock()
	if h.killed {
		h.mu.Unlock()
		return
	}
	list := make([]*active, 0, len(h.leases))
	beats := make([]fence.Beat, 0, len(h.leases))
	for _, a := range h.leases {
		list = append(list, a)
		beats = append(beats, fence.Beat{Lease: a.lease, Progress: a.task.Progress()})
	}
	h.mu.Unlock()
	if len(beats) == 0 {
		return
	}
	// A renewal that takes longer than a tick is worth nothing: the next
	// tick sends a fresh one.
	rctx, cancel := context.WithTimeout(ctx, h.interval)
	defer cancel()
	started := time.Now()
	renewals, errs := h.store.HeartbeatBatch(rctx, beats, h.ttl)
	h.m.HeartbeatRTT.Observe(time.Since(started).Seconds())
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
			if ctx.Err() == nil {
				h.log.Warn("heartbeat_failed", "run_id", a.lease.Run, "node_id", a.lease.Node,
					"epoch", a.lease.Epoch, "err", err)
			}
		}
	}
}
