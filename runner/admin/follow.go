package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Live event streams (GET /v1/runs/{id}/events?follow=1) as Server-Sent
// Events. Each event is sent as
//
//	id: <stream id>
//	data: <the event as JSON, as in the list form>
//
// with the Redis stream entry id as the SSE id, so a client that
// reconnects with Last-Event-ID (EventSource does by itself) resumes right
// after the last event it saw. A comment line (": keep-alive") goes out
// when nothing happened for FollowKeepAlive, so proxies keep the
// connection. Once the run has ended and every event up to its end was
// sent, the stream sends
//
//	event: end
//	data: {"id": "<run>", "status": "SUCCEEDED"}
//
// and closes. A client must stop on "end": EventSource would otherwise
// reconnect, and get the same end again.
//
// A stream is served for at most Config.FollowMaxAge, then closed without
// "end": the client reconnects with Last-Event-ID and loses nothing. One
// client (its address, see Config.TrustedProxies) holds at most
// Config.FollowersPerClient streams, so clients that never read cannot
// take every slot for good.

// Limits of the live event streams.
const (
	// FollowKeepAlive is the longest a follower waits for an event in one
	// blocking read of Redis, and so the longest silence between two
	// writes, and how long a follower whose client left may hold a Redis
	// connection.
	FollowKeepAlive = 10 * time.Second
	// MaxFollowers bounds the streams served at once by one admin server:
	// each holds one pooled Redis connection while it waits (the runner's
	// pool has 32). More are answered 503 with Retry-After.
	MaxFollowers = 16
	// DefaultFollowersPerClient is Config.FollowersPerClient's default.
	DefaultFollowersPerClient = 8
	// DefaultFollowMaxAge is Config.FollowMaxAge's default.
	DefaultFollowMaxAge = 10 * time.Minute
	// followWriteTimeout bounds each write of a stream: the server's
	// WriteTimeout is extended by this much before every write, so a
	// stream outlives it while a stalled client still loses its
	// connection.
	followWriteTimeout = 30 * time.Second
	// followRetryMS is the reconnect delay the stream asks clients for.
	followRetryMS = 2000
)

// EndEvent is the data of the stream's final event.
type EndEvent struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// followers counts the streams being served, in all (at most max) and
// per client.
type followers struct {
	max       int
	perClient int
	mu        sync.Mutex
	n         int
	clients   map[string]int
}

func newFollowers(max, perClient int) *followers {
	return &followers{max: max, perClient: perClient, clients: map[string]int{}}
}

// acquire takes a slot for client; it answers the status to refuse with
// otherwise: 429 when the client holds its share, 503 when all are taken.
func (f *followers) acquire(client string) (int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.n >= f.max:
		return http.StatusServiceUnavailable, false
	case f.clients[client] >= f.perClient:
		return http.StatusTooManyRequests, false
	}
	f.n++
	f.clients[client]++
	return 0, true
}

func (f *followers) release(client string) {
	f.mu.Lock()
	f.n--
	if f.clients[client]--; f.clients[client] <= 0 {
		delete(f.clients, client)
	}
	f.mu.Unlock()
}

// wantsFollow reports whether an events request asks for the live stream
// (follow=1 or true); without it the route answers one page of JSON.
func wantsFollow(r *http.Request) bool {
	b, _ := strconv.ParseBool(r.URL.Query().Get("follow"))
	return b
}

func (a *api) follow(w http.ResponseWriter, r *http.Request) {
	run := r.PathValue("id")
	after := r.Header.Get("Last-Event-ID")
	from := "Last-Event-ID"
	if after == "" {
		after, from = r.URL.Query().Get("after"), "after"
	}
	if after != "" && !streamID.MatchString(after) {
		writeError(w, http.StatusBadRequest, from+" "+strconv.Quote(after)+": want an event id such as 1700000000000-0")
		return
	}
	ctx := r.Context()
	// An unknown run is a 404, not an empty stream.
	f, err := a.client.Follow(ctx, run, after)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	f.Wait = FollowKeepAlive
	client := a.clientOf(r)
	if code, ok := a.followers.acquire(client); !ok {
		w.Header().Set("Retry-After", "5")
		msg := "too many event streams (" + strconv.Itoa(MaxFollowers) + "); retry later"
		if code == http.StatusTooManyRequests {
			msg = "too many event streams from " + client + " (" + strconv.Itoa(a.followers.perClient) + "); retry later"
		}
		writeError(w, code, msg)
		return
	}
	defer a.followers.release(client)
	ctx, cancel := context.WithTimeout(ctx, a.followMaxAge)
	defer cancel()

	s := &sseWriter{w: w, rc: http.NewResponseController(w)}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	s.buf.WriteString("retry: " + strconv.Itoa(followRetryMS) + "\n\n")
	if err := s.flush(); err != nil {
		return
	}
	for ctx.Err() == nil {
		evs, err := f.Next(ctx)
		switch {
		case errors.Is(err, io.EOF):
			s.event("end", EndEvent{ID: run, Status: f.Status()})
			_ = s.flush()
			return
		case err != nil && r.Context().Err() == nil && ctx.Err() != nil:
			return // served FollowMaxAge: the client resumes with Last-Event-ID
		case err != nil:
			a.streamFailed(s, r, run, err)
			return
		case len(evs) == 0:
			s.buf.WriteString(": keep-alive\n\n")
		}
		for _, e := range evs {
			s.data(e.ID, e)
		}
		if err := s.flush(); err != nil {
			return // the client went away
		}
	}
}

// streamFailed ends a stream that could not read on with an "error"
// event; the client reconnects with Last-Event-ID and loses nothing.
func (a *api) streamFailed(s *sseWriter, r *http.Request, run string, err error) {
	if r.Context().Err() != nil && errors.Is(err, context.Canceled) {
		return // the client went away
	}
	a.log.Warn("event_stream_failed", "run_id", run, "err", err)
	s.event("error", ErrorBody{Error: err.Error()})
	_ = s.flush()
}

// sseWriter frames Server-Sent Events into a buffer and writes it out in
// one write per flush, each under its own write deadline.
type sseWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf bytes.Buffer
}

func (s *sseWriter) data(id string, v any) {
	b, _ := json.Marshal(v) // events and bodies always encode; JSON has no raw newlines
	s.buf.WriteString("id: " + id + "\ndata: ")
	s.buf.Write(b)
	s.buf.WriteString("\n\n")
}

func (s *sseWriter) event(name string, v any) {
	b, _ := json.Marshal(v)
	s.buf.WriteString("event: " + name + "\ndata: ")
	s.buf.Write(b)
	s.buf.WriteString("\n\n")
}

func (s *sseWriter) flush() error {
	if err := s.rc.SetWriteDeadline(time.Now().Add(followWriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	_, err := s.w.Write(s.buf.Bytes())
	s.buf.Reset()
	if err != nil {
		return err
	}
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}
