package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/runfeed"
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
// The clients of one run share one reader per process (internal/runfeed,
// which the Agent Server API's streams use too): one goroutine does the
// blocking reads of Redis and keeps the newest entries; each client sends
// from there, and reads Redis itself only for what is older (a replay).

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
)

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
	f, ok := a.feeds.Join(thread, run)
	if !ok {
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "too many runs streamed ("+strconv.Itoa(MaxStreamRuns)+"); retry later")
		return
	}
	defer a.feeds.Leave(f)

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
		es, behind, ended, wake := f.After(after)
		if behind {
			if es, err = store.ReadStreamOf(ctx, thread, run, after, runfeed.Page, 0); err != nil {
				a.streamFailed(s, r, run, err)
				return
			}
			if done, _ := f.Ended(); len(es) == 0 && done {
				ended = true // nothing left to read, and the run is over
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
