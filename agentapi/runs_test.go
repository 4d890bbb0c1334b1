package agentapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/agentapi"
)

// runsThread returns a fresh thread id.
func runsThread(t *testing.T) string {
	return fmt.Sprintf("00000000-0000-4000-8000-%012d", runsThreadSeq.Add(1))
}

// TestRuns drives the runs routes against a real runner serving real
// Python graphs on a real redis-server, as the SDKs call them.
func TestRuns(t *testing.T) {
	e := runsSetup(t, agentapi.StreamLimits{})

	t.Run("StreamFramesEveryEventAsTheSDKsParseIt", func(t *testing.T) {
		t.Parallel()
		tid := runsThread(t)
		s := e.openStream(t, t.Context(), "POST", "/threads/"+tid+"/runs/stream",
			`{"assistant_id": "chat", "input": {"topic": "fencing"}, "stream_mode": ["values", "updates", "custom"], "if_not_exists": "create"}`)
		require.Equal(t, http.StatusOK, s.resp.StatusCode)
		assert.Equal(t, "text/event-stream", s.resp.Header.Get("Content-Type"))
		loc := s.resp.Header.Get("Content-Location")
		require.Regexp(t, `^/threads/`+tid+`/runs/[0-9a-f-]{36}$`, loc)
		assert.Equal(t, loc+"/stream", s.resp.Header.Get("Location"))
		rid := loc[strings.LastIndex(loc, "/")+1:]
		evs := s.all()
		require.NotEmpty(t, evs)
		assert.Equal(t, "metadata", evs[0].event, "the attempt's start comes first")
		assert.JSONEq(t, fmt.Sprintf(`{"run_id": %q, "attempt": 1}`, rid), evs[0].data)
		names := runsEventNames(evs)
		for _, want := range []string{"values", "updates", "custom"} {
			assert.Contains(t, names, want)
		}
		for _, ev := range evs {
			assert.NotEmpty(t, ev.id, "every event carries its stream id")
			assert.NotContains(t, ev.data, "\n", "data on one line")
			assert.True(t, json.Valid([]byte(ev.data)), ev.data)
		}
		assert.NotContains(t, names, "error")
		last := evs[len(evs)-1]
		for i := len(evs) - 1; i >= 0 && last.event != "values"; i-- {
			last = evs[i]
		}
		assert.JSONEq(t, `{"topic": "fencing", "steps": ["plan fencing", "write"]}`, last.data)

		code, _, body := e.call(t, "GET", loc, "")
		require.Equal(t, http.StatusOK, code)
		run := runsJSON(t, body)
		assert.Equal(t, "success", run["status"])
		assert.Equal(t, tid, run["thread_id"])
		assert.Equal(t, rid, run["run_id"])
		assert.Equal(t, "eb6db400-e3c8-5d06-a834-015cb89efe69", run["assistant_id"], "the graph's default assistant, as the reference derives it")
		assert.Equal(t, "reject", run["multitask_strategy"])
		for _, k := range []string{"created_at", "updated_at", "metadata", "kwargs"} {
			assert.Contains(t, run, k)
		}
	})

	t.Run("WaitAnswersTheLastValuesAndJoinTheSame", func(t *testing.T) {
		t.Parallel()
		tid := runsThread(t)
		code, h, body := e.call(t, "POST", "/threads/"+tid+"/runs/wait", `{"assistant_id": "chat", "input": {"topic": "a"}, "if_not_exists": "create"}`)
		require.Equal(t, http.StatusOK, code, "%s", body)
		assert.Regexp(t, `^/threads/`+tid+`/runs/[0-9a-f-]{36}$`, h.Get("Content-Location"))
		assert.JSONEq(t, `{"topic": "a", "steps": ["plan a", "write"]}`, string(body))
		// The second turn builds on the thread's state.
		code, _, body = e.call(t, "POST", "/threads/"+tid+"/runs", `{"assistant_id": "chat", "input": {"topic": "b"}}`)
		require.Equal(t, http.StatusOK, code, "%s", body)
		run := runsJSON(t, body)
		assert.Contains(t, []any{"pending", "running"}, run["status"])
		rid := run["run_id"].(string)
		code, _, body = e.call(t, "GET", "/threads/"+tid+"/runs/"+rid+"/join", "")
		require.Equal(t, http.StatusOK, code)
		assert.JSONEq(t, `{"topic": "b", "steps": ["plan a", "write", "plan b", "write"]}`, string(body))
		code, _, body = e.call(t, "GET", "/threads/"+tid+"/runs", "")
		require.Equal(t, http.StatusOK, code)
		var list []map[string]any
		require.NoError(t, json.Unmarshal(body, &list))
		require.Len(t, list, 2)
		assert.Equal(t, rid, list[0]["run_id"], "newest first")
		assert.Equal(t, "success", list[0]["status"])
		assert.Equal(t, "success", list[1]["status"])
	})

	t.Run("AFailedRunEndsWithAnErrorEvent", func(t *testing.T) {
		t.Parallel()
		tid := runsThread(t)
		s := e.openStream(t, t.Context(), "POST", "/threads/"+tid+"/runs/stream", `{"assistant_id": "boom", "input": {}, "if_not_exists": "create"}`)
		evs := s.all()
		require.NotEmpty(t, evs)
		last := evs[len(evs)-1]
		require.Equal(t, "error", last.event, "%v", evs)
		var e1 struct{ Error, Message string }
		require.NoError(t, json.Unmarshal([]byte(last.data), &e1))
		assert.Equal(t, "ValueError", e1.Error)
		assert.Contains(t, e1.Message, "the node explodes")
		code, _, body := e.call(t, "POST", "/threads/"+tid+"/runs/wait", `{"assistant_id": "boom", "input": {}}`)
		require.Equal(t, http.StatusOK, code)
		assert.JSONEq(t, `{"__error__": {"error": "ValueError", "message": "the node explodes"}}`, string(body))
		loc := s.resp.Header.Get("Content-Location")
		_, _, body = e.call(t, "GET", loc, "")
		assert.Equal(t, "error", runsJSON(t, body)["status"])
	})
}
