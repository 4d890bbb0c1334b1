package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/delivery"
)

// A run's stream (GET /v1/runs/{id}/stream): the chunks its attempts
// stream (fence.Store.AppendStream), as Server-Sent Events,
//
//	id: <Redis stream id>
//	event: <stream mode: values, updates, messages, custom, metadata, ...>
//	data: <the chunk's JSON, on one line>
//
// replayed from the start, or after the id in Last-Event-ID (EventSource
// sends it on reconnect) or ?after=, then live. A "metadata" event
// ({"run_id", "attempt"}) marks where each attempt starts: after a
// takeover the super-step it re-runs is seen twice, and a client drops the
// partial message of the attempt before. ": heartbeat" comments go out
// when nothing happened for StreamHeartbeat. Once the run has ended and
// every chunk was sent, the stream sends "event: end" (data as in
// follow.go) and closes.
//
// The clients of one run share one reader per process: one goroutine does
// the blocking reads of Redis (the run's stream and its events in one
// XREAD, so the run's end wakes it at once) and keeps the newest
// streamRing entries; each client sends from there, and reads Redis
// itself, without blocking, only for what is older (a replay).

// Limits of the run streams.
const (
	// StreamHeartbeat is the longest silence on a run's stream.
	StreamHeartbeat = 10 * time.Second
	// MaxStreamRuns bounds the runs whose streams one admin server serves
	// at once: each run's reader holds one pooled Redis connection while it
	// waits. Clients of a run already served are not counted. More are
	// answered 503 with Retry-After.
	MaxStreamRuns = 16
	// MaxStreamClients bounds the clients of run streams one admin server
	// serves at once, all runs together; a client (an address, or the
	// forwarded one behind TRUSTED_PROXY) holds at most the event streams'
	// share (FollowersPerClient) of them. Each client costs a goroutine and
	// its buffers, not a Redis connection. More are answered 503 (all) or
	// 429 (a client's share) with Retry-After.
	MaxStreamClients = 1024
	// streamBlock is how long the reader's XREAD waits, and so how long a
	// reader whose clients all left may hold its connection.
	streamBlock = 5 * time.Second
	// streamRing is how many of the newest entries a reader keeps for its
	// clients; streamPage how many a client reads at once from Redis.
	streamRing = 4096
	streamPage = 512
)

// feedHub holds the readers of the runs being streamed; its zero value is
// ready.
type feedHub struct {
	mu    sync.Mutex
	feeds map[string]*runFeed
}

// runFeed is one run's shared reader.
type runFeed struct {
	store *fence.Store
	key   string // thread/run in the hub
	c     fence.StreamCursor
	log   interface{ Warn(string, ...any) }

	mu    sync.Mutex
	ready bool                // base and ring are set
	base  string              // every entry after base up to the ring's last is in ring
	ring  []fence.StreamEntry // the newest entries, in order
	ended bool                // the run has ended and its stream was read to the end
	wake  chan struct{}       // closed when ring, ready or ended change
	subs  int
	stop  context.CancelFunc
}

// join returns the run's reader, starting one if none; false when
// MaxStreamRuns are served already.
func (h *feedHub) join(a *api, thread, run string) (*runFeed, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	key := thread + "/" + run
	if f := h.feeds[key]; f != nil {
		f.mu.Lock()
		f.subs++
		f.mu.Unlock()
		return f, true
	}
	if len(h.feeds) >= MaxStreamRuns {
		return nil, false
	}
	if h.feeds == nil {
		h.feeds = map[string]*runFeed{}
	}
	ctx, stop := context.WithCancel(context.Background())
	f := &runFeed{store: a.client.Store(), key: key, log: a.log, subs: 1, stop: stop, wake: make(chan struct{}),
		c: fence.StreamCursor{Thread: thread, Run: run}}
	h.feeds[key] = f
	go f.read(ctx)
	return f, true
}

// leave drops a client; the last one stops the reader.
func (h *feedHub) leave(f *runFeed) {
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
func (f *runFeed) changed() {
	close(f.wake)
	f.wake = make(chan struct{})
}

// read is the reader's loop: from the stream's tail as it starts (clients
// read what is older themselves), until the run has ended and its stream
// is read to the end, or its last client left.
func (f *runFeed) read(ctx context.Context) {
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
		block := streamBlock
		if ended {
			block = time.Millisecond // drain what is left, then end
		}
		es, evs, c, err := f.store.WaitStream(ctx, f.c, streamRing, block)
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
			if over := len(f.ring) - streamRing; over > 0 {
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
func (f *runFeed) runEnded(ctx context.Context) bool {
	st, err := f.store.RunStatus(ctx, f.c.Run)
	return errors.Is(err, fence.ErrNotFound) || (err == nil && delivery.Terminal(st))
}

// after returns the entries after id the reader holds; behind when id is
// older than what it holds (the client reads Redis itself); ended when
// the run has ended and nothing after id is left; and a channel closed at
// the next change.
func (f *runFeed) after(id string) (es []fence.StreamEntry, behind, ended bool, wake <-chan struct{}) {
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

// stream serves GET /v1/runs/{id}/stream.
func (a *api) stream(w http.ResponseWriter, r *http.Request) {
	run := r.PathValue("id")
	after, from := r.Header.Get("Last-Event-ID"), "Last-Event-ID"
	if after == "" {
		after, from = r.URL.Query().Get("after"), "after"
	}
	if !fence.ValidStreamID(after) {
		writeError(w, http.StatusBadRequest, from+" "+strconv.Quote(after)+": want a stream id such as 1700000000000-0, or -1 for the start")
		return
	}
	if after == "" || after == "-1" {
		after = "0"
	}
	ctx := r.Context()
	store := a.client.Store()
	thread, err := store.Locate(ctx, run) // an unknown run is a 404, not an empty stream
	if err != nil {
		a.fail(w, r, err)
		return
	}
	// A client's share of the streams, and a lifetime, as for event
	// streams (follow.go): clients that never read cannot hold them all,
	// and one that outlives it reconnects with Last-Event-ID.
	client := a.clientOf(r)
	if code, ok := a.streamers.acquire(client); !ok {
		w.Header().Set("Retry-After", "5")
		msg := "too many run streams (" + strconv.Itoa(MaxStreamClients) + "); retry later"
		if code == http.StatusTooManyRequests {
			msg = "too many run streams from " + client + " (" + strconv.Itoa(a.streamers.perClient) + "); retry later"
		}
		writeError(w, code, msg)
		return
	}
	defer a.streamers.release(client)
	ctx, cancel := context.WithTimeout(ctx, a.followMaxAge)
	defer cancel()
	f, ok := a.feeds.join(a, thread, run)
	if !ok {
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "too many runs streamed ("+strconv.Itoa(MaxStreamRuns)+"); retry later")
		return
	}
	defer a.feeds.leave(f)

	s := &sseWriter{w: w, rc: http.NewResponseController(w)}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s.buf.WriteString("retry: " + strconv.Itoa(followRetryMS) + "\n\n")
	if s.flush() != nil {
		return
	}
	beat := time.NewTimer(StreamHeartbeat)
	defer beat.Stop()
	for {
		es, behind, ended, wake := f.after(after)
		if behind {
			if es, err = store.ReadStreamOf(ctx, thread, run, after, streamPage, 0); err != nil {
				a.streamFailed(s, r, run, err)
				return
			}
		}
		if len(es) > 0 {
			for _, e := range es {
				writeChunk(&s.buf, e)
			}
			after = es[len(es)-1].ID
			if s.flush() != nil {
				return // the client went away
			}
			beat.Reset(StreamHeartbeat)
			continue
		}
		if ended {
			st, _ := store.RunStatus(ctx, run)
			s.event("end", EndEvent{ID: run, Status: st})
			_ = s.flush()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-beat.C:
			s.buf.WriteString(": heartbeat\n\n")
			if s.flush() != nil {
				return
			}
			beat.Reset(StreamHeartbeat)
		}
	}
}

// writeChunk frames one entry. The store keeps data on one line; data
// written by other means is compacted so that it is.
func writeChunk(buf *bytes.Buffer, e fence.StreamEntry) {
	data := []byte(e.Data)
	if len(data) == 0 {
		data = []byte("null")
	}
	if bytes.ContainsAny(data, "\r\n") {
		var c bytes.Buffer
		if json.Compact(&c, data) == nil {
			data = c.Bytes()
		} else {
			data, _ = json.Marshal(string(data)) // not JSON: sent as a JSON string
		}
	}
	buf.WriteString("id: " + e.ID + "\nevent: " + e.Event + "\ndata: ")
	buf.Write(data)
	buf.WriteString("\n\n")
}
