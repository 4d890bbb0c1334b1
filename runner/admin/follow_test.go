package admin_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/admin"
)

// sseMessage is one dispatched Server-Sent Event.
type sseMessage struct {
	id, event, data string
}

// sseStream reads a text/event-stream response.
type sseStream struct {
	resp *http.Response
	sc   *bufio.Scanner
}

func openStream(t *testing.T, ctx context.Context, url, lastID string) *sseStream {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	return &sseStream{resp: resp, sc: sc}
}

// next returns the next event, skipping comments and the retry field; ok
// is false at the end of the stream.
func (s *sseStream) next() (m sseMessage, ok bool) {
	seen := false
	for s.sc.Scan() {
		line := s.sc.Text()
		if line == "" {
			if seen {
				return m, true
			}
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimPrefix(v, " ")
		switch k {
		case "id":
			m.id, seen = v, true
		case "event":
			m.event, seen = v, true
		case "data":
			m.data, seen = v, true
		}
	}
	return m, false
}

// serveReal serves admin.NewServer with a short WriteTimeout on a real
// redis-server, with a worker that runs noop nodes not yet started.
func serveReal(t *testing.T, writeTimeout time.Duration) (base string, client *runner.Client, w *runner.Worker) {
	t.Helper()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	client, err := runner.NewClient(runner.ClientConfig{Redis: rdb})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	hs, err := admin.NewServer(admin.Config{Client: client, Redis: rdb, Logger: testLogger(t), WriteTimeout: writeTimeout})
	require.NoError(t, err)
	hs.Handler = contract(t, hs.Handler)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { defer close(done); _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close(); <-done })

	w, err = runner.NewWorker(runner.WorkerConfig{Redis: rdb, Concurrency: 16, PollInterval: 5 * time.Millisecond,
		Logger: testLogger(t)})
	require.NoError(t, err)
	w.Register("noop", runner.KindFunc(func(context.Context, *runner.Task) (json.RawMessage, error) {
		return json.RawMessage(`true`), nil
	}))
	return "http://" + ln.Addr().String(), client, w
}

// A follower sees every event of a 1,000-node run, in the stream's order,
// across a reconnect with Last-Event-ID, on a server whose WriteTimeout is
// shorter than the run; the stream ends with the run's outcome.
func TestFollowThousandNodesAcrossReconnect(t *testing.T) {
	t.Parallel()
	base, client, w := serveReal(t, 100*time.Millisecond)

	// Ten chains of a hundred nodes: node i waits for node i-10.
	var nodes []string
	for i := range 1000 {
		deps := ""
		if i >= 10 {
			deps = fmt.Sprintf(`, "deps": ["n%d"]`, i-10)
		}
		nodes = append(nodes, fmt.Sprintf(`{"id": "n%d", "kind": "noop"%s}`, i, deps))
	}
	spec, err := runner.ParseSpec([]byte(`{"id": "big", "nodes": [` + strings.Join(nodes, ",") + `]}`))
	require.NoError(t, err)
	_, err = client.Submit(t.Context(), spec)
	require.NoError(t, err)

	url := base + "/v1/runs/big/events?follow=1"
	var got []sseMessage
	ctx1, cancel1 := context.WithCancel(t.Context())
	s := openStream(t, ctx1, url, "")
	first, ok := s.next()
	require.True(t, ok)
	got = append(got, first) // "submitted", before any worker runs

	// The worker starts only now: the stream waits for events, live.
	require.NoError(t, w.Start(t.Context()))
	t.Cleanup(w.Shutdown)
	for len(got) < 1200 {
		m, ok := s.next()
		require.True(t, ok, "stream ended after %d events", len(got))
		got = append(got, m)
	}
	cancel1() // the client goes away mid-run
	s.resp.Body.Close()

	s = openStream(t, t.Context(), url, got[len(got)-1].id)
	var end sseMessage
	for {
		m, ok := s.next()
		require.True(t, ok, "stream closed without an end event after %d events", len(got))
		if m.event == "end" {
			end = m
			break
		}
		got = append(got, m)
	}
	_, more := s.next()
	assert.False(t, more, "the stream closes after its end event")
	s.resp.Body.Close()

	var ended admin.EndEvent
	require.NoError(t, json.Unmarshal([]byte(end.data), &ended))
	assert.Equal(t, admin.EndEvent{ID: "big", Status: "SUCCEEDED"}, ended)

	all, err := client.Events(t.Context(), "big", "", 0)
	require.NoError(t, err)
	require.Len(t, got, len(all), "every event once")
	committed := map[string]bool{}
	for i, m := range got {
		var e fence.Event
		require.NoError(t, json.Unmarshal([]byte(m.data), &e))
		require.Equal(t, all[i].ID, m.id, "event %d in stream order", i)
		require.Equal(t, m.id, e.ID)
		require.Equal(t, all[i].Type, e.Type)
		if e.Type == "committed" {
			committed[e.Node] = true
		}
	}
	assert.Len(t, committed, 1000)
	assert.Equal(t, "run_finished", all[len(all)-1].Type)

	// Resuming after the end sends the end again, and nothing else.
	s = openStream(t, t.Context(), url, got[len(got)-1].id)
	m, ok := s.next()
	require.True(t, ok)
	assert.Equal(t, "end", m.event)
	s.resp.Body.Close()
}

// Without follow the route answers JSON as before; an unknown run or a
// malformed Last-Event-ID is refused before any stream starts.
func TestFollowRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	b.call(t, "POST", "/v1/runs", `{"id": "f-1", "nodes": [{"id": "a", "kind": "noop"}]}`, http.StatusCreated, nil)

	var evs admin.EventsBody
	b.call(t, "GET", "/v1/runs/f-1/events", "", http.StatusOK, &evs)
	require.Len(t, evs.Events, 1)

	e := b.errorBody(t, "GET", "/v1/runs/nope/events?follow=1", "", http.StatusNotFound)
	assert.Contains(t, e.Error, "not found")
	req := b.request(t, "GET", "/v1/runs/f-1/events?follow=1", "")
	req.Header.Set("Last-Event-ID", "x; DROP")
	resp, raw := send(t, req)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, string(raw), "Last-Event-ID")
}

// A run cancelled while followed ends its stream with the cancellation,
// on miniredis too.
func TestFollowCancelledRun(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	b.call(t, "POST", "/v1/runs", `{"id": "f-2", "nodes": [{"id": "a", "kind": "noop"}]}`, http.StatusCreated, nil)
	req := b.request(t, "GET", "/v1/runs/f-2/events?follow=1", "")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	s := &sseStream{resp: resp, sc: bufio.NewScanner(resp.Body)}
	m, ok := s.next()
	require.True(t, ok)
	require.Contains(t, m.data, `"submitted"`)

	b.call(t, "POST", "/v1/runs/f-2/cancel", "", http.StatusOK, nil)
	var types []string
	for {
		m, ok := s.next()
		require.True(t, ok, "stream closed without an end event; saw %v", types)
		if m.event == "end" {
			assert.JSONEq(t, `{"id": "f-2", "status": "CANCELLED"}`, m.data)
			break
		}
		var e fence.Event
		require.NoError(t, json.Unmarshal([]byte(m.data), &e))
		types = append(types, e.Type)
	}
	assert.Contains(t, types, "run_finished")
}

// An admin server serves at most admin.MaxFollowers streams at once (each
// holds a Redis connection while it waits); one more is told to retry
// later. A cancel wakes every waiting stream, and each ends with the
// outcome.
func TestFollowersAreBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, options{real: true, perClient: admin.MaxFollowers})
	b.call(t, "POST", "/v1/runs", `{"id": "many", "nodes": [{"id": "a", "kind": "noop"}]}`, http.StatusCreated, nil)
	var streams []*sseStream
	for range admin.MaxFollowers {
		s := openStream(t, t.Context(), b.url+"/v1/runs/many/events?follow=1", "")
		m, ok := s.next()
		require.True(t, ok)
		require.Contains(t, m.data, `"submitted"`)
		streams = append(streams, s)
	}
	resp, raw := send(t, b.request(t, "GET", "/v1/runs/many/events?follow=1", ""))
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s", raw)
	assert.Equal(t, "5", resp.Header.Get("Retry-After"))
	assert.Contains(t, string(raw), "too many event streams")

	b.call(t, "POST", "/v1/runs/many/cancel", "", http.StatusOK, nil)
	for i, s := range streams {
		for {
			m, ok := s.next()
			require.True(t, ok, "stream %d closed without an end event", i)
			if m.event == "end" {
				assert.JSONEq(t, `{"id": "many", "status": "CANCELLED"}`, m.data)
				break
			}
		}
		s.resp.Body.Close()
	}
	// The slots are free again once the streams' handlers have returned
	// (a moment after the client read "end").
	require.Eventually(t, func() bool {
		resp, _ := send(t, b.request(t, "GET", "/v1/runs/many/events?follow=1", ""))
		return resp.StatusCode == http.StatusOK
	}, 5*time.Second, 10*time.Millisecond, "a stream is served again")
}

// A client that goes away frees its stream (and the Redis connection it
// waits on) within admin.FollowKeepAlive, while the run goes on.
func TestFollowerLeavingFreesItsSlot(t *testing.T) {
	t.Parallel()
	b := setup(t, options{real: true, perClient: admin.MaxFollowers})
	b.call(t, "POST", "/v1/runs", `{"id": "left", "nodes": [{"id": "a", "kind": "noop"}]}`, http.StatusCreated, nil)
	ctx, cancel := context.WithCancel(t.Context())
	for range admin.MaxFollowers {
		s := openStream(t, ctx, b.url+"/v1/runs/left/events?follow=1", "")
		_, ok := s.next()
		require.True(t, ok)
	}
	resp, _ := send(t, b.request(t, "GET", "/v1/runs/left/events?follow=1", ""))
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)

	cancel() // every client leaves; the run is still RUNNING
	require.Eventually(t, func() bool {
		req := b.request(t, "GET", "/v1/runs/left/events?follow=1", "")
		rctx, rcancel := context.WithCancel(t.Context())
		defer rcancel()
		resp, err := http.DefaultClient.Do(req.WithContext(rctx))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, admin.FollowKeepAlive+5*time.Second, 50*time.Millisecond, "a new stream is served once the old ones noticed their clients left")
}
