package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/admin"
)

// readChunks reads n events of a run's stream.
func readChunks(t *testing.T, s *sseStream, n int) []sseMessage {
	t.Helper()
	var got []sseMessage
	for len(got) < n {
		m, ok := s.next()
		require.True(t, ok, "stream ended after %d events", len(got))
		got = append(got, m)
	}
	return got
}

// readToEnd reads a run's stream up to its end event, which it requires.
func readToEnd(t *testing.T, s *sseStream) []sseMessage {
	t.Helper()
	var got []sseMessage
	for {
		m, ok := s.next()
		require.True(t, ok, "stream closed without an end event after %d events", len(got))
		if m.event == "end" {
			var end admin.EndEvent
			require.NoError(t, json.Unmarshal([]byte(m.data), &end))
			assert.Equal(t, "SUCCEEDED", end.Status)
			_, more := s.next()
			assert.False(t, more, "the stream closes after its end event")
			return got
		}
		got = append(got, m)
	}
}

// Two clients follow a run's stream live, as its attempt streams tokens;
// one goes away mid-run and comes back with Last-Event-ID: it misses no
// token and gets none twice. Each chunk's SSE id is its Redis stream id,
// event its stream mode, data its JSON; the stream ends after the run.
func TestRunStreamLiveAcrossReconnect(t *testing.T) {
	t.Parallel()
	base, client, w := serveReal(t, 100*time.Millisecond)
	gate := make(chan struct{})
	const tokens = 10
	w.Register("talk", runner.KindFunc(func(ctx context.Context, task *runner.Task) (json.RawMessage, error) {
		for i := range tokens {
			select {
			case <-gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			data := json.RawMessage(fmt.Sprintf(`[{"content": "t%d"}, {"langgraph_node": "model"}]`, i))
			if err := task.Stream(ctx, fence.StreamChunk{Event: "messages", Data: data}); err != nil {
				return nil, err
			}
		}
		return json.RawMessage(`"done"`), nil
	}))
	spec, err := runner.ParseSpec([]byte(`{"id": "chat", "nodes": [{"id": "model", "kind": "talk"}]}`))
	require.NoError(t, err)
	_, err = client.Submit(t.Context(), spec)
	require.NoError(t, err)

	url := base + "/v1/runs/chat/stream"
	ctxA, cancelA := context.WithCancel(t.Context())
	a := openStream(t, ctxA, url, "")
	b := openStream(t, t.Context(), url+"?after=-1", "")
	require.NoError(t, w.Start(t.Context()))
	t.Cleanup(w.Shutdown)
	for range tokens / 2 {
		gate <- struct{}{}
	}
	gotA := readChunks(t, a, 1+tokens/2) // metadata, then the tokens so far
	gotB := readChunks(t, b, 1+tokens/2)
	cancelA()
	a.resp.Body.Close()
	for range tokens / 2 {
		gate <- struct{}{}
	}
	a = openStream(t, t.Context(), url, gotA[len(gotA)-1].id)
	gotA = append(gotA, readToEnd(t, a)...)
	a.resp.Body.Close()
	gotB = append(gotB, readToEnd(t, b)...)
	b.resp.Body.Close()

	stored, err := client.Store().ReadStream(t.Context(), "chat", "", 0, 0)
	require.NoError(t, err)
	require.Len(t, stored, 1+tokens)
	want := make([]sseMessage, len(stored))
	for i, e := range stored {
		want[i] = sseMessage{id: e.ID, event: e.Event, data: string(e.Data)}
	}
	assert.Equal(t, want, gotA, "every chunk once, in order, across the reconnect")
	assert.Equal(t, want, gotB)
	assert.Equal(t, "metadata", gotA[0].event)
	assert.JSONEq(t, `{"run_id": "chat", "attempt": 1}`, gotA[0].data)
	assert.Equal(t, `[{"content":"t9"},{"langgraph_node":"model"}]`, gotA[tokens].data)

	// Replayed after the end, from a middle id: the rest, then the end.
	c := openStream(t, t.Context(), url+"?after="+want[3].id, "")
	assert.Equal(t, want[4:], readToEnd(t, c))
	c.resp.Body.Close()
}

// A malformed id or an unknown run is refused before any stream starts.
func TestRunStreamRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	b.call(t, "GET", "/v1/runs/nope/stream", "", http.StatusNotFound, nil)
	b.call(t, "POST", "/v1/runs", `{"id": "s-1", "nodes": [{"id": "a", "kind": "noop"}]}`, http.StatusCreated, nil)
	b.call(t, "GET", "/v1/runs/s-1/stream?after=x", "", http.StatusBadRequest, nil)
	req := b.request(t, "GET", "/v1/runs/s-1/stream", "")
	req.Header.Set("Last-Event-ID", "1-2-3")
	resp, _ := send(t, req)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	b.call(t, "POST", "/v1/runs/s-1/stream", "", http.StatusMethodNotAllowed, nil)
}
