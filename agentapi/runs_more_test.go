package agentapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/agentapi"
	"github.com/batonrun/baton/client"
)

// createBackground starts a run in the background and returns its id.
func (e *runsEnv) createBackground(t *testing.T, tid, body string) string {
	t.Helper()
	code, _, b := e.call(t, "POST", "/threads/"+tid+"/runs", body)
	require.Equal(t, http.StatusOK, code, "%s", b)
	return runsJSON(t, b)["run_id"].(string)
}

// runsOf lists a thread's runs in baton's store.
func (e *runsEnv) runsOf(t *testing.T, tid string) []client.RunSummary {
	t.Helper()
	sums, err := e.client.ListRuns(t.Context(), client.ListOptions{Thread: tid})
	require.NoError(t, err)
	return sums
}

func TestRunsMore(t *testing.T) {
	e := runsSetup(t, agentapi.StreamLimits{})
	slowBody := func(ticks int, extra string) string {
		return `{"assistant_id": "slow", "input": {"ticks": ` + itoa(ticks) + `, "every": 0.02}, "stream_mode": "custom"` + extra + `}`
	}

	// A client cut off mid-run reconnects with Last-Event-ID and misses
	// and repeats nothing; "-1" replays the whole stream.
	t.Run("JoinStreamResumesAfterLastEventID", func(t *testing.T) {
		t.Parallel()
		tid := runsThread(t)
		rid := e.createBackground(t, tid, slowBody(40, `, "if_not_exists": "create"`))
		path := "/threads/" + tid + "/runs/" + rid + "/stream"
		ctx, cut := context.WithCancel(t.Context())
		a := e.openStream(t, ctx, "GET", path, "", "Last-Event-ID", "-1")
		require.Equal(t, http.StatusOK, a.resp.StatusCode)
		var got []runsSSE
		for len(got) < 6 {
			ev, ok := a.next()
			require.True(t, ok)
			got = append(got, ev)
		}
		cut()
		b := e.openStream(t, t.Context(), "GET", path, "", "Last-Event-ID", got[len(got)-1].id)
		got = append(got, b.all()...)

		stored, err := e.client.ReadStream(t.Context(), rid, "", 0)
		require.NoError(t, err)
		require.Len(t, got, len(stored), "every event once")
		for i, s := range stored {
			assert.Equal(t, s.ID, got[i].id)
			assert.Equal(t, s.Event, got[i].event)
		}
		assert.Equal(t, "metadata", got[0].event)
		assert.Len(t, stored, 41, "metadata and 40 ticks")
		// Replayed after the end.
		c := e.openStream(t, t.Context(), "GET", path, "", "Last-Event-ID", "-1")
		assert.Len(t, c.all(), 41)
	})

	// reject refuses a run on a busy thread with 409 and stores nothing;
	// interrupt cancels the active run and starts; enqueue waits its turn.
	t.Run("MultitaskStrategies", func(t *testing.T) {
		t.Parallel()
		tid := runsThread(t)
		first := e.createBackground(t, tid, slowBody(1000, `, "if_not_exists": "create"`))
		code, _, body := e.call(t, "POST", "/threads/"+tid+"/runs", slowBody(1, ``))
		assert.Equal(t, http.StatusConflict, code)
		assert.Contains(t, string(body), "Thread is already running a task")
		assert.Len(t, e.runsOf(t, tid), 1, "nothing stored")

		queued := e.createBackground(t, tid, slowBody(1, `, "multitask_strategy": "enqueue"`))
		_, _, body = e.call(t, "GET", "/threads/"+tid+"/runs/"+queued, "")
		assert.Equal(t, "pending", runsJSON(t, body)["status"])
		assert.Equal(t, "enqueue", runsJSON(t, body)["multitask_strategy"])

		code, _, body = e.call(t, "POST", "/threads/"+tid+"/runs/wait", slowBody(1, `, "multitask_strategy": "interrupt"`))
		require.Equal(t, http.StatusOK, code)
		assert.Contains(t, string(body), "ticked")
		_, _, body = e.call(t, "GET", "/threads/"+tid+"/runs/"+first, "")
		assert.Equal(t, "interrupted", runsJSON(t, body)["status"])
		// baton's interrupt cancels the active run only: the queued one
		// runs after it (the reference cancels it too; docs/agent-server.md).
		_, _, body = e.call(t, "GET", "/threads/"+tid+"/runs/"+queued+"/join", "")
		assert.Contains(t, string(body), "ticked")
		_, _, body = e.call(t, "GET", "/threads/"+tid+"/runs/"+queued, "")
		assert.Equal(t, "success", runsJSON(t, body)["status"])

		// rollback: the active run is cancelled and the next one runs.
		active := e.createBackground(t, tid, slowBody(1000, ``))
		code, _, body = e.call(t, "POST", "/threads/"+tid+"/runs/wait", slowBody(1, `, "multitask_strategy": "rollback"`))
		require.Equal(t, http.StatusOK, code)
		assert.Contains(t, string(body), "ticked")
		_, _, body = e.call(t, "GET", "/threads/"+tid+"/runs/"+active, "")
		assert.Equal(t, "interrupted", runsJSON(t, body)["status"])
	})

	// on_disconnect=cancel: the run ends when its stream's client goes
	// away; after_seconds delays a run, pending meanwhile.
	t.Run("OnDisconnectCancelAndAfterSeconds", func(t *testing.T) {
		t.Parallel()
		tid := runsThread(t)
		ctx, cut := context.WithCancel(t.Context())
		s := e.openStream(t, ctx, "POST", "/threads/"+tid+"/runs/stream", slowBody(1000, `, "if_not_exists": "create", "on_disconnect": "cancel"`))
		ev, ok := s.next()
		require.True(t, ok)
		require.Equal(t, "metadata", ev.event)
		cut()
		loc := s.resp.Header.Get("Content-Location")
		_, _, _ = e.call(t, "GET", loc+"/join", "")
		_, _, body := e.call(t, "GET", loc, "")
		assert.Equal(t, "interrupted", runsJSON(t, body)["status"])

		rid := e.createBackground(t, tid, slowBody(1, `, "after_seconds": 0.5`))
		_, _, body = e.call(t, "GET", "/threads/"+tid+"/runs/"+rid, "")
		assert.Equal(t, "pending", runsJSON(t, body)["status"])
		code, _, body := e.call(t, "GET", "/threads/"+tid+"/runs/"+rid+"/join", "")
		require.Equal(t, http.StatusOK, code)
		assert.Contains(t, string(body), "ticked")
	})

	t.Run("CancelWaitsForTheEnd", func(t *testing.T) {
		t.Parallel()
		tid := runsThread(t)
		rid := e.createBackground(t, tid, slowBody(1000, `, "if_not_exists": "create"`))
		code, _, _ := e.call(t, "POST", "/threads/"+tid+"/runs/"+rid+"/cancel?wait=1&action=interrupt", "")
		assert.Equal(t, http.StatusNoContent, code)
		_, _, body := e.call(t, "GET", "/threads/"+tid+"/runs/"+rid, "")
		assert.Equal(t, "interrupted", runsJSON(t, body)["status"])
		code, _, _ = e.call(t, "POST", "/threads/"+tid+"/runs/"+rid+"/cancel", "")
		assert.Equal(t, http.StatusAccepted, code, "an ended run is answered as cancelled")
		code, _, _ = e.call(t, "DELETE", "/threads/"+tid+"/runs/"+rid, "")
		assert.Equal(t, http.StatusNoContent, code)
		code, _, _ = e.call(t, "GET", "/threads/"+tid+"/runs/"+rid, "")
		assert.Equal(t, http.StatusNotFound, code)

		// Cancel many, by status.
		other := runsThread(t)
		r2 := e.createBackground(t, other, slowBody(1000, `, "if_not_exists": "create"`))
		code, _, body = e.call(t, "POST", "/runs/cancel", `{"thread_id": "`+other+`", "status": "all"}`)
		require.Equal(t, http.StatusNoContent, code, "%s", body)
		_, _, body = e.call(t, "GET", "/threads/"+other+"/runs/"+r2+"/join", "")
		_, _, body = e.call(t, "GET", "/threads/"+other+"/runs/"+r2, "")
		assert.Equal(t, "interrupted", runsJSON(t, body)["status"])
	})

	// Bad input is answered as the reference does, and stores nothing.
	t.Run("BadInput", func(t *testing.T) {
		t.Parallel()
		tid := runsThread(t)
		e.createBackground(t, tid, `{"assistant_id": "chat", "input": {}, "if_not_exists": "create"}`)
		_, _, _ = e.call(t, "GET", "/threads/"+tid+"/runs/"+e.runsOf(t, tid)[0].ID+"/join", "")
		cases := []struct {
			path, body string
			code       int
			detail     string
		}{
			{"/threads/" + tid + "/runs", `not json`, 422, "body"},
			{"/threads/" + tid + "/runs", `{"input": {}}`, 422, "assistant_id"},
			{"/threads/" + tid + "/runs", `{"assistant_id": 7}`, 422, "assistant_id"},
			{"/threads/" + tid + "/runs", `{"assistant_id": "chat", "stream_mode": "tokens"}`, 422, "stream_mode"},
			{"/threads/" + tid + "/runs", `{"assistant_id": "chat", "config": []}`, 422, "config"},
			{"/threads/" + tid + "/runs", `{"assistant_id": "chat", "multitask_strategy": "later"}`, 422, "multitask_strategy"},
			{"/threads/" + tid + "/runs", `{"assistant_id": "nope"}`, 404, "No assistant found"},
			{"/threads/" + runsThread(t) + "/runs", `{"assistant_id": "chat"}`, 404, "not found"},
			{"/threads/" + runsThread(t) + "/runs/wait", `{"assistant_id": "chat", "if_not_exists": "reject"}`, 404, "not found"},
			{"/runs/batch", `[]`, 422, "body"},
			{"/threads/" + tid + "/runs", `{"assistant_id": "chat", "webhook": "ftp://x"}`, 422, "webhook"},
			{"/threads/" + tid + "/runs", `{"assistant_id": "chat", "after_seconds": "soon"}`, 422, "after_seconds"},
			{"/runs/batch", `[{"assistant_id": "chat"}, {"assistant_id": "nope"}]`, 404, "[1]"},
		}
		for _, c := range cases {
			code, _, body := e.call(t, "POST", c.path, c.body)
			assert.Equal(t, c.code, code, "%s %s: %s", c.path, c.body, body)
			assert.Contains(t, runsJSON(t, body)["detail"], c.detail, "%s %s", c.path, c.body)
		}
		assert.Len(t, e.runsOf(t, tid), 1, "nothing stored")
		all, err := e.client.List(t.Context(), "", 1000)
		require.NoError(t, err)
		for _, r := range all {
			assert.NotEqual(t, "", r.Thread)
		}
		code, _, _ := e.call(t, "GET", "/threads/"+tid+"/runs/00000000-0000-4000-8000-999999999999", "")
		assert.Equal(t, http.StatusNotFound, code)
		code, _, _ = e.call(t, "GET", "/threads/"+runsThread(t)+"/runs/"+e.runsOf(t, tid)[0].ID, "")
		assert.Equal(t, http.StatusNotFound, code, "a run of another thread")
		code, _, _ = e.call(t, "GET", "/threads/"+tid+"/runs/"+e.runsOf(t, tid)[0].ID+"/stream", "", "Last-Event-ID", "x-y")
		assert.Equal(t, http.StatusUnprocessableEntity, code)
	})

	t.Run("StatelessRuns", func(t *testing.T) {
		t.Parallel()
		code, h, body := e.call(t, "POST", "/runs/wait", `{"assistant_id": "chat", "input": {"topic": "s"}}`)
		require.Equal(t, http.StatusOK, code, "%s", body)
		assert.JSONEq(t, `{"topic": "s", "steps": ["plan s", "write"]}`, string(body))
		loc := h.Get("Content-Location")
		require.Regexp(t, `^/runs/[0-9a-f-]{36}$`, loc)
		code, _, _ = e.call(t, "GET", loc, "")
		assert.Equal(t, http.StatusNotFound, code, "on_completion=delete, the default for stateless runs")

		code, _, body = e.call(t, "POST", "/runs/wait", `{"assistant_id": "chat", "input": {"topic": "k"}, "on_completion": "keep"}`)
		require.Equal(t, http.StatusOK, code)
		code, _, body = e.call(t, "POST", "/runs/batch", `[{"assistant_id": "chat", "input": {"topic": "1"}}, {"assistant_id": "chat", "input": {"topic": "2"}}]`)
		require.Equal(t, http.StatusOK, code, "%s", body)
		var runs []map[string]any
		require.NoError(t, json.Unmarshal(body, &runs))
		require.Len(t, runs, 2)
		assert.NotEqual(t, runs[0]["thread_id"], runs[1]["thread_id"], "each on a thread of its own")
		code, _, body = e.call(t, "GET", "/runs/"+runs[1]["run_id"].(string)+"/join", "")
		require.Equal(t, http.StatusOK, code)
		assert.JSONEq(t, `{"topic": "2", "steps": ["plan 2", "write"]}`, string(body))
	})

	// Many clients of one run share one reader: every client gets every
	// event, and the process reads the run once.
	// Not parallel: it counts the process's readers, while the parallel
	// subtests wait.
	t.Run("ClientsOfARunShareOneReader", func(t *testing.T) {
		tid := runsThread(t)
		rid := e.createBackground(t, tid, slowBody(30, `, "if_not_exists": "create"`))
		const clients = 50
		streams := make([]*runsSSEStream, clients)
		for i := range streams {
			streams[i] = e.openStream(t, t.Context(), "GET", "/threads/"+tid+"/runs/"+rid+"/stream", "", "Last-Event-ID", "-1")
			require.Equal(t, http.StatusOK, streams[i].resp.StatusCode)
		}
		got := make([][]runsSSE, clients)
		var wg sync.WaitGroup
		for i, s := range streams {
			wg.Go(func() {
				ev, ok := s.next()
				if ok {
					got[i] = append([]runsSSE{ev}, s.all()...)
				}
			})
		}
		assert.Equal(t, 1, e.api.StreamRuns(), "one reader for 50 clients")
		assert.Equal(t, clients, e.api.StreamClients())
		wg.Wait()
		stored, err := e.client.ReadStream(t.Context(), rid, "", 0)
		require.NoError(t, err)
		for i := range got {
			require.Len(t, got[i], len(stored), "client %d", i)
		}
	})
}

// Past the cap of runs read at once, a stream is refused with 503 and
// Retry-After before any byte of it, never an empty 200; heartbeats keep a
// quiet stream alive.
func TestRunStreamCapsAndHeartbeats(t *testing.T) {
	e := runsSetup(t, agentapi.StreamLimits{})
	capped, err := agentapi.New(agentapi.Config{Client: e.client, Graphs: e.graphs,
		Logger: runsLogger(t), Streams: agentapi.StreamLimits{MaxRuns: 1, Heartbeat: 20 * time.Millisecond}})
	require.NoError(t, err)
	hs := httptest.NewServer(capped)
	t.Cleanup(hs.Close)
	ce := &runsEnv{url: hs.URL, client: e.client, api: capped}

	tid1, tid2 := runsThread(t), runsThread(t)
	body := `{"assistant_id": "slow", "input": {"ticks": 10, "every": 0.1}, "stream_mode": "custom", "if_not_exists": "create"}`
	r1 := ce.createBackground(t, tid1, body)
	r2 := ce.createBackground(t, tid2, body)
	a := ce.openStream(t, t.Context(), "GET", "/threads/"+tid1+"/runs/"+r1+"/stream", "")
	require.Equal(t, http.StatusOK, a.resp.StatusCode)
	b := ce.openStream(t, t.Context(), "GET", "/threads/"+tid2+"/runs/"+r2+"/stream", "")
	assert.Equal(t, http.StatusServiceUnavailable, b.resp.StatusCode)
	assert.NotEmpty(t, b.resp.Header.Get("Retry-After"))
	assert.NotEqual(t, "text/event-stream", b.resp.Header.Get("Content-Type"))
	evs := a.all()
	assert.Equal(t, "metadata", evs[0].event)
	assert.Greater(t, a.comments, 0, ": heartbeat between ticks 100 ms apart")
	for _, ev := range evs {
		assert.NotEqual(t, "error", ev.event)
	}
	// Once the first is done, the second is served.
	c := ce.openStream(t, t.Context(), "GET", "/threads/"+tid2+"/runs/"+r2+"/stream", "", "Last-Event-ID", "-1")
	assert.Equal(t, http.StatusOK, c.resp.StatusCode)
	assert.Len(t, c.all(), 11)
}

func itoa(n int) string { return strings.TrimSpace(strings.Repeat(" ", 0) + jsonNum(n)) }

func jsonNum(n int) string { b, _ := json.Marshal(n); return string(b) }
