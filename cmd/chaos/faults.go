package main

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"syscall"
	"time"

	"github.com/batonrun/baton/internal/chaos/check"
)

// planned is one fault of the seeded schedule: what, whom, when (from the
// start of the fault window) and for how long.
type planned struct {
	at     time.Duration
	kind   string
	target int // runner index; unused for Redis and duplicates
	dur    time.Duration
}

// faultWeights say how often each kind is drawn. Link faults are cheap and
// frequent; a Redis kill stops everyone and is rare.
var faultWeights = []struct {
	kind   string
	weight int
}{
	{check.KindStop, 12}, {check.KindKill, 10}, {check.KindTerm, 6},
	{check.KindReset, 10}, {check.KindLostReply, 14}, {"stall_short", 7}, {"stall_long", 7},
	{check.KindBlackhole, 8}, {check.KindRedisKill, 4}, {check.KindDuplicate, 12},
}

// plan draws the fault schedule from the seed alone, so that a seed names a
// schedule. classes[i] is slot i's class (slots of one class serve the
// same kinds). Process faults never overlap on one runner, at least one
// runner of each class is free of them at any time, and Redis is killed at
// most once at a time.
func plan(seed uint64, window time.Duration, classes []int, t timing) []planned {
	runners := len(classes)
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	total := 0
	for _, w := range faultWeights {
		total += w.weight
	}
	busy := make([]time.Duration, runners) // until when a runner's process is faulted
	var redisBusy time.Duration
	var out []planned
	for at := 2 * time.Second; ; at += 400*time.Millisecond + time.Duration(rng.Int64N(int64(2200*time.Millisecond))) {
		pick := rng.IntN(total)
		kind := faultWeights[0].kind
		for _, w := range faultWeights {
			if pick < w.weight {
				kind = w.kind
				break
			}
			pick -= w.weight
		}
		p := planned{at: at, kind: kind, target: rng.IntN(runners)}
		between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo))) }
		switch kind {
		case check.KindStop:
			p.dur = t.LeaseTTL + t.Grace + between(300*time.Millisecond, 2*time.Second) // past its lease
		case check.KindKill:
			p.dur = between(200*time.Millisecond, 1500*time.Millisecond) // down before the restart
		case check.KindTerm:
			p.dur = between(200*time.Millisecond, 1000*time.Millisecond)
		case check.KindLostReply:
			p.dur = between(300*time.Millisecond, 1500*time.Millisecond)
		case "stall_short":
			p.kind, p.dur = check.KindStall, between(100*time.Millisecond, t.LeaseTTL*6/10)
		case "stall_long":
			p.kind, p.dur = check.KindStall, between(t.LeaseTTL+t.Grace, 2*t.LeaseTTL+t.Grace)
		case check.KindBlackhole:
			p.dur = between(500*time.Millisecond, 3*time.Second)
		case check.KindRedisKill:
			p.dur = between(200*time.Millisecond, 1000*time.Millisecond)
		}
		if at+p.dur > window {
			break
		}
		switch {
		case p.kind == check.KindRedisKill:
			if at < redisBusy {
				continue
			}
			redisBusy = at + p.dur + 3*time.Second
		case p.kind == check.KindStop || p.kind == check.KindKill || p.kind == check.KindTerm:
			free := 0
			for i, b := range busy {
				if b <= at && classes[i] == classes[p.target] {
					free++
				}
			}
			if busy[p.target] > at || free < 2 {
				continue
			}
			// A drain may take SHUTDOWN_TIMEOUT; a restart, a moment.
			busy[p.target] = at + p.dur + t.Shutdown + time.Second
		}
		out = append(out, p)
	}
	return out
}

// injector carries out a schedule against the fleet and records each fault
// with when it really started and ended.
type injector struct {
	h   *harness
	log *slog.Logger
	wg  sync.WaitGroup

	mu     sync.Mutex
	faults []check.Fault
	dups   int
}

func (in *injector) record(f check.Fault) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.faults = append(in.faults, f)
}

// Faults returns what was injected so far.
func (in *injector) Faults() []check.Fault {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]check.Fault(nil), in.faults...)
}

// run injects the schedule until it is done or ctx ends, then waits for the
// faults in progress to finish.
func (in *injector) run(ctx context.Context, start time.Time, sched []planned) {
	for _, p := range sched {
		select {
		case <-ctx.Done():
			in.wg.Wait()
			return
		case <-time.After(time.Until(start.Add(p.at))):
		}
		in.wg.Add(1)
		go func(p planned) {
			defer in.wg.Done()
			in.inject(ctx, p)
		}(p)
	}
	in.wg.Wait()
}

func (in *injector) inject(ctx context.Context, p planned) {
	h := in.h
	now := func() int64 { return time.Now().UnixNano() }
	if p.kind == check.KindRedisKill {
		h.redisMu.Lock()
		defer h.redisMu.Unlock()
		f := check.Fault{Kind: p.kind, Target: "redis", Start: now()}
		h.redis.kill()
		in.log.Info("fault", "kind", p.kind, "down_for", p.dur)
		time.Sleep(p.dur)
		if err := h.redis.restart(context.WithoutCancel(ctx)); err != nil {
			in.log.Error("redis_restart_failed", "err", err)
		}
		f.End = now()
		in.record(f)
		return
	}
	if p.kind == check.KindDuplicate {
		in.mu.Lock()
		in.dups++
		n := in.dups
		in.mu.Unlock()
		if node, ok := h.work.duplicate(ctx, n); ok {
			t := now()
			in.record(check.Fault{Kind: p.kind, Target: node, Start: t, End: t})
			in.log.Info("fault", "kind", p.kind, "node", node)
		}
		return
	}
	s := h.runners[p.target]
	f := check.Fault{Kind: p.kind, Target: s.id}
	switch p.kind {
	case check.KindStop, check.KindKill, check.KindTerm:
		s.faultMu.Lock()
		defer s.faultMu.Unlock()
	}
	in.log.Info("fault", "kind", p.kind, "runner", s.id, "for", p.dur)
	f.Start = now()
	switch p.kind {
	case check.KindStop:
		f.Source = s.signal(syscall.SIGSTOP)
		time.Sleep(p.dur)
		s.signal(syscall.SIGCONT)
	case check.KindKill:
		f.Source = s.kill()
		time.Sleep(p.dur)
		if err := s.start(); err != nil {
			in.log.Error("runner_restart_failed", "runner", s.id, "err", err)
		}
	case check.KindTerm:
		var killed bool
		f.Source, killed = s.term()
		if killed { // the drain overran: as far as histories go, a kill
			in.record(check.Fault{Kind: check.KindKill, Target: s.id, Source: f.Source, Start: now(), End: now()})
		}
		time.Sleep(p.dur)
		if err := s.start(); err != nil {
			in.log.Error("runner_restart_failed", "runner", s.id, "err", err)
		}
	case check.KindReset:
		s.proxy.Reset()
	case check.KindLostReply:
		s.proxy.LoseReplies(p.dur)
		time.Sleep(p.dur)
	case check.KindStall:
		s.proxy.Stall(p.dur)
	case check.KindBlackhole:
		s.proxy.Blackhole(p.dur)
	}
	f.End = now()
	in.record(f)
}
