package runner

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/batonrun/baton/fence"
)

// sweeper re-enqueues nodes whose lease expired (a dead or paused owner) and
// READY nodes left unclaimed (a crash between a state write and its
// enqueue). Every runner runs one; they share work through the sweep
// script, and a duplicate enqueue is refused by the deterministic task ID.
// Its cost follows what is due, never history.
type sweeper struct {
	store    *fence.Store
	queue    enqueuer
	interval time.Duration
	opts     fence.SweepOptions
	log      *slog.Logger
	m        *Metrics
	wg       sync.WaitGroup

	retention time.Duration // negative: runs are kept forever
	busyEvery time.Duration // retention's wait while runs keep ending (retainBusyEvery)
	trimmed   time.Time     // when the run listing was last trimmed

	// The runner's advertisement (kinds and queues), refreshed every
	// adTTL/3 and live for adTTL: what `enqueue workers` lists and what
	// tells a node nobody serves.
	self       fence.WorkerInfo
	adTTL      time.Duration
	advertised time.Time
	// hb, when set, is the heartbeater whose health the advertisement
	// carries; it is then refreshed at least every heartbeat interval, so
	// the fleet view sees a runner that stops renewing within about one.
	hb        *heartbeater
	adChanges uint64 // the heartbeater's lease changes when last advertised
	// unserved holds the stale READY nodes last found served by no live
	// runner, with when: the baton_nodes_unserved gauge.
	unserved map[string]time.Time
	// again: the last sweep's reply was lost, or what it handed out was not
	// all enqueued; the next sweep asks for that hand-out again rather
	// than leave it to another sweeper after the retry interval.
	again bool
}

func (s *sweeper) start(ctx context.Context) {
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(s.interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.sweep(ctx)
			}
		}
	}()
	go func() {
		defer s.wg.Done()
		s.retainLoop(ctx)
	}()
}

func (s *sweeper) wait() { s.wg.Wait() }

// advertise refreshes the runner's advertisement every advertiseEvery,
// and at the next sweep after a lease was taken or finished: the fleet
// view shows a claim within a sweep interval, so a runner paused just
// after one is seen holding it.
func (s *sweeper) advertise(ctx context.Context) {
	if s.self.ID == "" {
		return
	}
	every := s.advertiseEvery()
	var changes uint64
	if s.hb != nil {
		changes = s.hb.leaseChanges()
	}
	// Half a tick of slack: a tick that comes a little early must not put
	// the refresh off by a whole tick.
	if time.Since(s.advertised) < every-s.interval/2 && changes == s.adChanges {
		return
	}
	s.self.SeenAt = time.Now()
	s.self.AdvertiseEveryMs = every.Milliseconds()
	if s.hb != nil {
		s.self.LeaseTTLMs = s.hb.ttl.Milliseconds()
		s.self.Health, changes = s.hb.health()
	}
	if err := s.store.Advertise(ctx, s.self, s.adTTL); err != nil {
		if ctx.Err() == nil {
			s.log.Warn("advertise_failed", "err", err)
		}
		return
	}
	s.advertised, s.adChanges = s.self.SeenAt, changes
}

// advertiseEvery is how often advertise refreshes: a third of the
// advertisement's life, and with a heartbeater at least once per heartbeat
// interval, rounded up to the sweeper's ticks that call it.
func (s *sweeper) advertiseEvery() time.Duration {
	every := s.adTTL / 3
	if s.hb != nil {
		every = min(every, s.hb.interval)
	}
	if s.interval > 0 {
		every = (every + s.interval - 1) / s.interval * s.interval
	}
	return every
}

// withdraw removes the advertisement of a runner that stops.
func (s *sweeper) withdraw(ctx context.Context) {
	if s.self.ID == "" {
		return
	}
	if err := s.store.Withdraw(ctx, s.self.ID); err != nil {
		s.log.Warn("withdraw_failed", "err", err)
	}
}

// sweep runs passes until nothing more is due. Expired leases come first,
// since a takeover waits on them; then the threads whose next run nobody
// started (after the runs whose timeout passed, whose end may free one),
// the waits that timed out, and the listing's trim.
func (s *sweeper) sweep(ctx context.Context) {
	s.advertise(ctx)
	defer s.forgetServed()
	s.sweepNodes(ctx)
	s.timeOutRuns(ctx)
	s.startQueued(ctx)
	s.timeOutWaits(ctx)
	s.trim(ctx)
}

// sweepNodes enqueues the nodes whose lease expired and the READY nodes
// left unclaimed, pass after pass while passes come back full.
func (s *sweeper) sweepNodes(ctx context.Context) {
	for ctx.Err() == nil {
		o := s.opts
		o.Sweeper, o.Again = s.self.ID, s.again
		sw, err := s.store.Sweep(ctx, o)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("sweep_failed", "err", err)
			}
			s.again = true
			return
		}
		s.again = sw.Partial != nil
		if sw.Partial != nil {
			s.log.Warn("sweep_partial", "err", sw.Partial)
		}
		s.enqueue(ctx, sw.Expired, "expired_lease")
		s.enqueue(ctx, sw.Ready, "stale_ready")
		if len(sw.Expired) < s.opts.Limit && len(sw.Ready) < s.opts.Limit {
			return
		}
	}
}

func (s *sweeper) enqueue(ctx context.Context, refs []fence.NodeRef, action string) {
	if len(refs) == 0 {
		return
	}
	peeks, err := s.store.Peek(ctx, refs)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("sweep_failed", "err", err)
		}
		s.again = true
		return
	}
	if action == "stale_ready" {
		s.reportUnserved(ctx, refs, peeks)
	}
	for i, ref := range refs {
		p := peeks[i]
		if p.State != "RUNNING" && p.State != "READY" {
			continue // finished since; the index entry goes with its next write
		}
		what := action
		fresh, err := s.queue.enqueueNew(ctx, ref, p.Queue, p.Attempt+1, time.Time{})
		if ctx.Err() != nil {
			return // shutting down: the next sweep, anyone's, does it
		}
		if err != nil {
			s.log.Warn("sweep_enqueue_failed", "run_id", ref.Run, "node_id", ref.Node, "err", err)
			s.again = true
			continue
		}
		if !fresh {
			// That attempt is on Asynq already: its delivery will claim,
			// unless it was dequeued and lost.
			if fresh, err = s.queue.redeliverStuck(ctx, ref, p.Queue, p.Attempt+1, s.opts.Retry); err != nil {
				s.log.Warn("sweep_enqueue_failed", "run_id", ref.Run, "node_id", ref.Node, "err", err)
			}
			if !fresh {
				continue
			}
			what += "_redelivered"
		}
		s.m.SweeperActions.WithLabelValues(what).Inc()
		s.log.Info("sweep_enqueued", "run_id", ref.Run, "node_id", ref.Node, "action", what, "attempt", p.Attempt+1)
	}
}

// startQueued starts waiting runs of threads whose active run ended
// without anyone starting the next (its ender crashed in between): those
// whose thread was last looked at over the READY threshold ago.
func (s *sweeper) startQueued(ctx context.Context) {
	threads, err := s.store.QueuedThreads(ctx, s.opts.Threshold, s.opts.Retry, s.opts.Limit)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("sweep_failed", "err", err)
		}
		return
	}
	for _, thread := range threads {
		run, err := advance(ctx, s.store, s.queue, thread, "sweeper")
		switch {
		case err != nil:
			s.log.Warn("thread_advance_failed", "thread", thread, "err", err)
		case run != "":
			s.m.SweeperActions.WithLabelValues("queued_run_started").Inc()
			s.log.Info("thread_run_started", "thread", thread, "run_id", run)
		}
	}
}

// retainBatch is how many ended runs per shard one retention call takes
// (up to 256 in all): a few milliseconds of work.
const retainBatch = 16

// retainBusyEvery is how often retention runs while runs keep ending.
const retainBusyEvery = 50 * time.Millisecond

// retainLoop applies the retention to runs that ended, in batches: at
// once when the runner starts, again at once while a call leaves a backlog
// (a shard held more ended runs than it took), every retainBusyEvery while
// runs keep ending, and every sweep interval while none do. A runner
// ending 2,000 runs a second used to retain them in one pipeline per sweep
// tick, which held Redis and the runner's two cores for 60-110 ms each
// second and put that into the p99 of every node started meanwhile (make
// bench -sections latency); spread over the second, the claims and commits
// go in between. The batches stay small when it catches up on a backlog,
// so claims and commits still go in between, but it no longer waits
// between them: at one batch per retainBusyEvery, a fleet ending more than
// about 5,000 runs of several nodes or of threads a second piled them up
// with no time to live. Runners share the work (fence.Store.RetainBatch).
func (s *sweeper) retainLoop(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r, err := s.store.RetainBatch(ctx, s.retention, retainBatch)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				s.log.Warn("retain_failed", "err", err)
			}
			t.Reset(s.interval)
		case r.Behind:
			t.Reset(0)
		case r.Runs > 0:
			t.Reset(s.busyEvery)
		default:
			t.Reset(s.interval)
		}
	}
}

// trim drops, about once a minute, listing entries of runs older than twice
// the retention: their keys are gone, and no run lives that long.
func (s *sweeper) trim(ctx context.Context) {
	if s.retention < 0 || time.Since(s.trimmed) < time.Minute {
		return
	}
	s.trimmed = time.Now()
	if n, err := s.store.TrimRuns(ctx, time.Now().Add(-2*s.retention)); err != nil {
		s.log.Warn("trim_failed", "err", err)
	} else if n > 0 {
		s.log.Info("runs_trimmed", "count", n)
	}
}

// reportUnserved checks stale READY nodes against the live runners: one
// that no runner serves is counted in baton_nodes_unserved and warned about
// once per node, whichever runner's sweeper finds it first.
func (s *sweeper) reportUnserved(ctx context.Context, refs []fence.NodeRef, peeks []fence.NodePeek) {
	live, err := s.store.Workers(ctx)
	if err != nil {
		s.log.Warn("sweep_failed", "err", err)
		return
	}
	if s.unserved == nil {
		s.unserved = map[string]time.Time{}
	}
	now := time.Now()
	for i, ref := range refs {
		p := peeks[i]
		why := ""
		if p.State == "READY" {
			why = fence.Unserved(live, p.Kind, p.Queue)
		}
		if why == "" {
			delete(s.unserved, ref.Ref())
			continue
		}
		s.unserved[ref.Ref()] = now
		first, err := s.store.MarkUnserved(ctx, ref, max(s.retention, 24*time.Hour))
		if err != nil {
			s.log.Warn("sweep_failed", "err", err)
			continue
		}
		if first {
			s.log.Warn("node_unserved", "run_id", ref.Run, "node_id", ref.Node, "kind", p.Kind, "queue", p.Queue,
				"reason", "waiting: "+why)
		}
	}
}

// forgetServed drops from the gauge the nodes not found unserved again: a
// READY node is handed to a sweeper again after each READY threshold, so
// one not seen for two of those was claimed or has finished.
func (s *sweeper) forgetServed() {
	for r, at := range s.unserved {
		if time.Since(at) > 2*s.opts.Threshold+s.interval {
			delete(s.unserved, r)
		}
	}
	s.m.NodesUnserved.Set(float64(len(s.unserved)))
}
