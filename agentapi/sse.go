package agentapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/runfeed"
)

// A run's stream as Server-Sent Events, framed as the SDKs parse it:
//
//	id: <Redis stream id>
//	event: <metadata, values, updates, messages, custom, ..., mode|ns>
//	data: <the chunk's JSON, on one line>
//
// "metadata" {run_id, attempt} marks each attempt's start (a takeover's
// re-run of a super-step comes after a new one); a failed run ends with
// "error" {error, message}; ": heartbeat" comments keep the connection
// when nothing happens. Every client of a run in this process reads
// through one shared reader (internal/runfeed), so clients cost no Redis
// connection of their own.

// StreamLimits bound the run streams one handler serves.
type StreamLimits struct {
	// MaxRuns bounds the runs whose streams are read at once: each run's
	// reader holds one pooled Redis connection while it waits (up to 5 s).
	// Clients of a run already read are not counted. More are answered 503
	// with Retry-After. Zero value: 16.
	MaxRuns int
	// MaxClients bounds the stream clients served at once, all runs
	// together; each costs a goroutine and its buffers, not a Redis
	// connection. More are answered 503 with Retry-After. Zero value: 4096.
	MaxClients int
	// Heartbeat is the longest silence on a stream: a ": heartbeat"
	// comment is sent then. Zero value: 5 s.
	Heartbeat time.Duration
	// WriteTimeout bounds each write to a client; a client that does not
	// read is dropped. Zero value: 30 s.
	WriteTimeout time.Duration
}

// runsRetryAfter is the Retry-After of a stream refused for its cap.
const runsRetryAfter = "2"

// runsStreamers holds the shared readers and counts the clients.
type runsStreamers struct {
	hub    *runfeed.Hub
	limits StreamLimits
	mu     sync.Mutex
	n      int
}

func newRunsStreamers(store *fence.Store, l StreamLimits, log *slog.Logger) *runsStreamers {
	l.MaxRuns = cmp.Or(l.MaxRuns, 16)
	l.MaxClients = cmp.Or(l.MaxClients, 4096)
	l.Heartbeat = cmp.Or(l.Heartbeat, 5*time.Second)
	l.WriteTimeout = cmp.Or(l.WriteTimeout, 30*time.Second)
	return &runsStreamers{hub: &runfeed.Hub{Store: store, MaxRuns: l.MaxRuns, Log: log}, limits: l}
}

// acquire takes a client's place; false past MaxClients.
func (st *runsStreamers) acquire() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.n >= st.limits.MaxClients {
		return false
	}
	st.n++
	return true
}

func (st *runsStreamers) release() {
	st.mu.Lock()
	st.n--
	st.mu.Unlock()
}

// StreamClients is the number of stream clients served now.
func (s *Server) StreamClients() int {
	s.runs.streams.mu.Lock()
	defer s.runs.streams.mu.Unlock()
	return s.runs.streams.n
}

// StreamRuns is the number of runs whose streams are read now (one shared
// reader each).
func (s *Server) StreamRuns() int { return s.runs.streams.hub.Runs() }

// runsTooBusy answers a stream refused for a cap: 503 with Retry-After, before
// any byte of a stream (never an empty 200).
func runsTooBusy(w http.ResponseWriter, what string) {
	w.Header().Set("Retry-After", runsRetryAfter)
	writeError(w, http.StatusServiceUnavailable, what+"; retry later")
}

// runsServeStream streams run rid of thread tid after the stream id after
// ("0": all of it) until the run has ended and its stream was sent.
// cancel: the run is cancelled if the client goes away first
// (on_disconnect=cancel); cleanup: a stateless run's thread is deleted
// after its end (on_completion=delete).
func (s *Server) runsServeStream(w http.ResponseWriter, r *http.Request, tid, rid, after string, cancel, cleanup bool) {
	st := s.runs.streams
	if !st.acquire() {
		runsTooBusy(w, "too many run streams ("+strconv.Itoa(st.limits.MaxClients)+")")
		return
	}
	defer st.release()
	f, ok := st.hub.Join(tid, rid)
	if !ok {
		runsTooBusy(w, "too many runs streamed at once ("+strconv.Itoa(st.limits.MaxRuns)+")")
		return
	}
	defer st.hub.Leave(f)

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	out := &sseWriter{w: w, rc: http.NewResponseController(w), timeout: st.limits.WriteTimeout}
	if out.flush() != nil {
		return
	}
	ctx := r.Context()
	store := s.cfg.Client.Store()
	beat := time.NewTimer(st.limits.Heartbeat)
	defer beat.Stop()
	for {
		es, behind, ended, wake := f.After(after)
		if behind {
			var err error
			if es, err = store.ReadStreamOf(ctx, tid, rid, after, runfeed.Page, 0); err != nil {
				if ctx.Err() == nil {
					s.log.Warn("agentapi_stream_failed", "run_id", rid, "err", err)
					out.event("", "error", runsErrorBody{Error: "StreamError", Message: err.Error()})
					_ = out.flush()
				}
				return
			}
			if done, _ := f.Ended(); len(es) == 0 && done {
				ended = true // nothing left to read, and the run is over
			}
		}
		if len(es) > 0 {
			for _, e := range es {
				out.event(e.ID, e.Event, e.Data)
			}
			after = es[len(es)-1].ID
			if out.flush() != nil {
				s.runsDisconnected(rid, cancel)
				return
			}
			beat.Reset(st.limits.Heartbeat)
			continue
		}
		if ended {
			s.runsStreamEnd(ctx, out, rid)
			_ = out.flush()
			if cleanup {
				s.runsDeleteStateless(rid)
			}
			return
		}
		select {
		case <-ctx.Done():
			s.runsDisconnected(rid, cancel)
			return
		case <-wake:
		case <-beat.C:
			out.buf.WriteString(": heartbeat\n\n")
			if out.flush() != nil {
				s.runsDisconnected(rid, cancel)
				return
			}
			beat.Reset(st.limits.Heartbeat)
		}
	}
}

// runsStreamEnd writes what follows a run's last chunk: for a failed run, an
// "error" event {error, message}, as the reference ends a failed run.
func (s *Server) runsStreamEnd(ctx context.Context, out *sseWriter, rid string) {
	info, err := s.cfg.Client.Store().GetRun(ctx, rid)
	if err != nil || info.Status != "FAILED" || len(info.Nodes) == 0 {
		return
	}
	out.event("", "error", runsErrorOf(info.Nodes[0].Error))
}

// runsDisconnected cancels the run of a stream whose client went away, when
// it asked for that (on_disconnect=cancel).
func (s *Server) runsDisconnected(rid string, cancel bool) {
	if !cancel {
		return
	}
	ctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	if _, err := s.cfg.Client.Cancel(ctx, rid, "cancelled: the client of its stream went away (on_disconnect=cancel)"); err != nil &&
		!errors.Is(err, fence.ErrRunDone) {
		s.log.Warn("agentapi_cancel_on_disconnect_failed", "run_id", rid, "err", err)
	}
}

// runsErrorBody is the data of an "error" event and of a wait's __error__.
type runsErrorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// runsExceptionName finds a Python or JS exception's name at a line's start
// ("ValueError: boom") or after a colon ("graph agent: ValueError: boom").
var runsExceptionName = regexp.MustCompile(`(?:^|: )([A-Za-z_][A-Za-z0-9_.]*(?:Error|Exception|Interrupt|Exit))(?::|$)`)

// runsErrorOf makes a node's error the reference's {error, message}: the
// exception's name, and what follows it.
func runsErrorOf(nodeErr string) runsErrorBody {
	first, _, _ := strings.Cut(nodeErr, "\n")
	if m := runsExceptionName.FindStringSubmatchIndex(first); m != nil {
		name := first[m[2]:m[3]]
		msg := strings.TrimSpace(strings.TrimPrefix(first[m[3]:], ":"))
		return runsErrorBody{Error: name, Message: msg}
	}
	return runsErrorBody{Error: "Error", Message: first}
}

// sseWriter frames events into a buffer and writes it out in one write per
// flush, each under its own write deadline.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	buf     bytes.Buffer
}

// event frames one event; data is JSON (compacted onto one line when it is
// not) or a value to encode.
func (o *sseWriter) event(id, name string, v any) {
	var data []byte
	switch d := v.(type) {
	case json.RawMessage:
		data = d
		if len(data) == 0 {
			data = []byte("null")
		}
		if bytes.ContainsAny(data, "\r\n") {
			var c bytes.Buffer
			if json.Compact(&c, data) == nil {
				data = c.Bytes()
			} else {
				data, _ = json.Marshal(string(data))
			}
		}
	default:
		data, _ = json.Marshal(v)
	}
	o.buf.WriteString("event: " + name + "\ndata: ")
	o.buf.Write(data)
	if id != "" {
		o.buf.WriteString("\nid: " + id)
	}
	o.buf.WriteString("\n\n")
}

func (o *sseWriter) flush() error {
	if err := o.rc.SetWriteDeadline(time.Now().Add(o.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	_, err := o.w.Write(o.buf.Bytes())
	o.buf.Reset()
	if err != nil {
		return err
	}
	if err := o.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}
