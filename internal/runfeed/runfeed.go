// Package runfeed shares one reader of a run's stream among the clients of
// that run in one process: the admin server's GET /v1/runs/{id}/stream and
// the Agent Server API's run streams (package agentapi) both read through
// a Hub, so a thousand clients of one run cost one blocking XREAD, not a
// thousand Redis connections.
//
// One goroutine per run does the blocking reads of Redis (the run's stream
// and its events in one XREAD, so the run's end wakes it at once) and keeps
// the newest Ring entries; each client sends from there, and reads Redis
// itself, without blocking, only for what is older (a replay).
package runfeed

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/delivery"
)

const (
	// Block is how long a reader's XREAD waits, and so how long a reader
	// whose clients all left may hold its pooled connection.
	Block = 5 * time.Second
	// Ring is how many of the newest entries a reader keeps for its
	// clients; Page how many a client reads at once from Redis when it is
	// behind the ring.
	Ring = 4096
	Page = 512
)

// Hub holds the readers of the runs being streamed. Store is required;
// MaxRuns bounds the runs read at once (each reader holds one pooled
// Redis connection while it waits); Log receives read failures (nil:
// slog.Default()). Its zero value with Store set is ready.
type Hub struct {
	Store   *fence.Store
	MaxRuns int
	Log     *slog.Logger

	mu    sync.Mutex
	feeds map[string]*Feed
}

// Feed is one run's shared reader.
type Feed struct {
	store *fence.Store
	key   string // thread/run in the hub
	c     fence.StreamCursor
	log   *slog.Logger

	mu    sync.Mutex
	ready bool                // base and ring are set
	base  string              // every entry after base up to the ring's last is in ring
	ring  []fence.StreamEntry // the newest entries, in order
	ended bool                // the run has ended and its stream was read to the end
	wake  chan struct{}       // closed when ring, ready or ended change
	subs  int
	stop  context.CancelFunc
}

// Runs is how many runs are read now.
func (h *Hub) Runs() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.feeds)
}

// Join returns the run's reader, starting one if none; false when MaxRuns
// are read already (clients of a run already read are not counted). Each
// Join is paired with a Leave.
func (h *Hub) Join(thread, run string) (*Feed, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	key := thread + "/" + run
	if f := h.feeds[key]; f != nil {
		f.mu.Lock()
		f.subs++
		f.mu.Unlock()
		return f, true
	}
	if h.MaxRuns > 0 && len(h.feeds) >= h.MaxRuns {
		return nil, false
	}
	if h.feeds == nil {
		h.feeds = map[string]*Feed{}
	}
	log := h.Log
	if log == nil {
		log = slog.Default()
	}
	ctx, stop := context.WithCancel(context.Background())
	f := &Feed{store: h.Store, key: key, log: log, subs: 1, stop: stop, wake: make(chan struct{}),
		c: fence.StreamCursor{Thread: thread, Run: run}}
	h.feeds[key] = f
	go f.read(ctx)
	return f, true
}

// Leave drops a client; the last one stops the reader.
func (h *Hub) Leave(f *Feed) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f.mu.Lock()
	f.subs--
	last := f.subs == 0
	f.mu.Unlock()
	if last {
		f.stop()
		delete(h.feeds, f.key)
	}
}

// changed wakes the clients; f.mu is held.
func (f *Feed) changed() {
	close(f.wake)
	f.wake = make(chan struct{})
}

// read is the reader's loop: from the stream's tail as it starts (clients
// read what is older themselves), until the run has ended and its stream
// is read to the end, or its last client left.
func (f *Feed) read(ctx context.Context) {
	delay := 50 * time.Millisecond
	pause := func() bool { // after a Redis error: back off, or stop with ctx
		t := time.NewTimer(delay)
		defer t.Stop()
		delay = min(2*delay, 2*time.Second)
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	for ctx.Err() == nil {
		c, err := f.store.StreamTail(ctx, f.c.Thread, f.c.Run)
		if err == nil {
			f.c = c
			break
		}
		f.log.Warn("run_stream_read_failed", "run_id", f.c.Run, "err", err)
		if !pause() {
			return
		}
	}
	f.mu.Lock()
	f.ready, f.base = true, f.c.Stream
	f.changed()
	f.mu.Unlock()

	ended := f.runEnded(ctx)
	for ctx.Err() == nil {
		block := Block
		if ended {
			block = time.Millisecond // drain what is left, then end
		}
		es, evs, c, err := f.store.WaitStream(ctx, f.c, Ring, block)
		if err != nil {
			if ctx.Err() == nil {
				f.log.Warn("run_stream_read_failed", "run_id", f.c.Run, "err", err)
			}
			if !pause() {
				return
			}
			continue
		}
		delay, f.c = 50*time.Millisecond, c
		for _, e := range evs {
			if e.Type == "run_finished" {
				ended = f.runEnded(ctx)
			}
		}
		f.mu.Lock()
		if len(es) > 0 {
			f.ring = append(f.ring, es...)
			if over := len(f.ring) - Ring; over > 0 {
				f.base = f.ring[over-1].ID
				f.ring = append([]fence.StreamEntry(nil), f.ring[over:]...)
			}
			f.changed()
		}
		if ended && len(es) == 0 && len(evs) == 0 {
			f.ended = true
			f.changed()
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
	}
}

// runEnded says whether the run has ended (or is gone).
func (f *Feed) runEnded(ctx context.Context) bool {
	st, err := f.store.RunStatus(ctx, f.c.Run)
	return errors.Is(err, fence.ErrNotFound) || (err == nil && delivery.Terminal(st))
}

// After returns the entries after id the reader holds; behind when id is
// older than what it holds (the client reads Redis itself, a Page at a
// time, with fence.Store.ReadStreamOf); ended when the run has ended and
// nothing after id is left; and a channel closed at the next change.
func (f *Feed) After(id string) (es []fence.StreamEntry, behind, ended bool, wake <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.ready || fence.CompareStreamIDs(id, f.base) < 0 {
		return nil, true, false, f.wake
	}
	i := len(f.ring)
	for i > 0 && fence.CompareStreamIDs(f.ring[i-1].ID, id) > 0 {
		i--
	}
	es = f.ring[i:len(f.ring):len(f.ring)]
	return es, false, f.ended && len(es) == 0, f.wake
}

// Ended says whether the run has ended and the reader read its stream to
// the end, with a channel closed at the next change: for a client that
// waits for the end and wants none of the entries.
func (f *Feed) Ended() (bool, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ended, f.wake
}
