package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/admin"
	"github.com/batonrun/baton/spec"
)

const twoNodes = `{"id": "rt-1", "nodes": [
	{"id": "a", "kind": "noop"},
	{"id": "b", "kind": "noop", "deps": ["a"]}]}`

// The whole life of a run through the API, on a real redis-server: submit,
// resubmit, conflict, read, events, list, cancel, cancel again.
func TestRunRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t, options{real: true, token: "round-trip-token-0123456789"})

	var sub admin.SubmitBody
	resp := b.call(t, "POST", "/v1/runs", twoNodes, http.StatusCreated, &sub)
	assert.Equal(t, "rt-1", sub.RunID)
	assert.True(t, sub.Created)
	assert.Equal(t, "RUNNING", sub.Status)
	assert.Equal(t, "/v1/runs/rt-1", resp.Header.Get("Location"))

	// The same spec again is a no-op that says so.
	b.call(t, "POST", "/v1/runs", twoNodes, http.StatusOK, &sub)
	assert.False(t, sub.Created)

	// Another spec under the same id is a conflict.
	e := b.errorBody(t, "POST", "/v1/runs", `{"id": "rt-1", "nodes": [{"id": "x", "kind": "noop"}]}`, http.StatusConflict)
	assert.Contains(t, e.Error, "different spec")

	var info fence.RunInfo
	b.call(t, "GET", "/v1/runs/rt-1", "", http.StatusOK, &info)
	assert.Equal(t, "RUNNING", info.Status)
	require.Len(t, info.Nodes, 2)
	assert.Equal(t, "a", info.Nodes[0].ID)
	assert.Equal(t, "READY", info.Nodes[0].State)
	assert.Equal(t, "BLOCKED", info.Nodes[1].State)
	assert.Equal(t, []string{"a"}, info.Nodes[1].Deps)

	var evs admin.EventsBody
	b.call(t, "GET", "/v1/runs/rt-1/events", "", http.StatusOK, &evs)
	require.NotEmpty(t, evs.Events)
	assert.Equal(t, "submitted", evs.Events[0].Type)
	assert.Equal(t, evs.Events[len(evs.Events)-1].ID, evs.Next)
	// Reading on from next returns nothing new, and next stays put.
	first := evs.Next
	b.call(t, "GET", "/v1/runs/rt-1/events?after="+first, "", http.StatusOK, &evs)
	assert.Empty(t, evs.Events)
	assert.Equal(t, first, evs.Next)

	var list admin.ListBody
	b.call(t, "GET", "/v1/runs?status=running&limit=10", "", http.StatusOK, &list)
	require.Len(t, list.Runs, 1)
	assert.Equal(t, runner.RunSummary{ID: "rt-1", Status: "RUNNING", Nodes: 2}, list.Runs[0])

	var c admin.CancelBody
	b.call(t, "POST", "/v1/runs/rt-1/cancel", `{"reason": "test over"}`, http.StatusOK, &c)
	assert.Equal(t, admin.CancelBody{ID: "rt-1", Status: "CANCELLED"}, c)

	b.call(t, "GET", "/v1/runs/rt-1", "", http.StatusOK, &info)
	assert.Equal(t, "CANCELLED", info.Status)
	assert.Equal(t, "test over", info.CancelReason)
	for _, n := range info.Nodes {
		assert.Equal(t, "CANCELLED", n.State, "node %s", n.ID)
	}

	// Cancelling again (no body) is harmless and says it was already done.
	b.call(t, "POST", "/v1/runs/rt-1/cancel", "", http.StatusOK, &c)
	assert.True(t, c.Already)

	b.call(t, "GET", "/v1/runs/rt-1/events?after="+first, "", http.StatusOK, &evs)
	var types []string
	for _, e := range evs.Events {
		types = append(types, e.Type)
	}
	assert.Contains(t, types, "cancel_requested")
	assert.Contains(t, types, "run_finished")

	b.call(t, "GET", "/v1/runs?status=running", "", http.StatusOK, &list)
	assert.Empty(t, list.Runs)
	b.call(t, "GET", "/v1/runs?status=CANCELLED", "", http.StatusOK, &list)
	require.Len(t, list.Runs, 1)
	assert.Equal(t, 2, list.Runs[0].Done)

	// thread= keeps one thread's runs: a run without a thread is the
	// thread of its own id.
	b.call(t, "GET", "/v1/runs?thread=rt-1", "", http.StatusOK, &list)
	require.Len(t, list.Runs, 1)
	assert.Equal(t, "rt-1", list.Runs[0].ID)
	b.call(t, "GET", "/v1/runs?thread=someone-else", "", http.StatusOK, &list)
	assert.Empty(t, list.Runs)
}

// A run a worker finished cannot be cancelled (409), and the worker's
// commit shows on /metrics.
func TestCancelFinishedRun(t *testing.T) {
	t.Parallel()
	b := setup(t, options{real: true})
	w, err := runner.NewWorker(runner.WorkerConfig{Redis: b.rdb, Metrics: b.metrics,
		PollInterval: 10 * time.Millisecond, Logger: testLogger(t)})
	require.NoError(t, err)
	w.Register("noop", runner.KindFunc(func(context.Context, *runner.Task) (json.RawMessage, error) {
		return json.RawMessage(`{"ok":true}`), nil
	}))
	require.NoError(t, w.Start(t.Context()))
	t.Cleanup(w.Shutdown)

	b.call(t, "POST", "/v1/runs", `{"id": "done-1", "nodes": [{"id": "only", "kind": "noop"}]}`, http.StatusCreated, nil)
	var info fence.RunInfo
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		resp, raw := send(t, b.request(t, "GET", "/v1/runs/done-1", ""))
		require.Equal(c, http.StatusOK, resp.StatusCode)
		require.NoError(c, json.Unmarshal(raw, &info))
		assert.Equal(c, "SUCCEEDED", info.Status)
	}, 10*time.Second, 10*time.Millisecond, "polling the run's status: the user-visible signal")
	assert.JSONEq(t, `{"ok":true}`, string(info.Nodes[0].Result))

	e := b.errorBody(t, "POST", "/v1/runs/done-1/cancel", "", http.StatusConflict)
	assert.Equal(t, "run done-1 already SUCCEEDED; nothing to cancel", e.Error, "the CLI's words, no fence: prefix")
	e = b.errorBody(t, "POST", "/v1/runs/done-1/retry", "", http.StatusConflict)
	assert.Equal(t, "run done-1 is SUCCEEDED; only a FAILED or CANCELLED run can be retried", e.Error)
	// Reads say it in the same words: what is missing, no package name.
	for path, want := range map[string]string{
		"/v1/runs/nope":                "run nope not found",
		"/v1/runs/nope/events":         "run nope not found",
		"/v1/threads/nope":             "thread nope not found",
		"/v1/threads/nope/checkpoints": "",
	} {
		resp, raw := send(t, b.request(t, "GET", path, ""))
		require.Equal(t, http.StatusNotFound, resp.StatusCode, "%s: %s", path, raw)
		var body admin.ErrorBody
		require.NoError(t, json.Unmarshal(raw, &body), path)
		assert.NotContains(t, body.Error, "fence", path)
		if want != "" {
			assert.Equal(t, want, body.Error, path)
		}
	}

	resp, raw := send(t, b.request(t, "GET", "/metrics", ""))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(raw), "baton_commits_total 1")
}

// Bad input is a 4xx with a JSON error naming what is wrong, never a 5xx.
func TestBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	b.call(t, "POST", "/v1/runs", `{"id": "exists", "nodes": [{"id": "a", "kind": "noop"}]}`, http.StatusCreated, nil)

	t.Run("spec problems name every field", func(t *testing.T) {
		t.Parallel()
		e := b.errorBody(t, "POST", "/v1/runs", `{"id": "bad{id", "nodes": [
			{"id": "a"},
			{"id": "b", "kind": "noop", "deps": ["zz"], "max_attempts": -1}]}`, http.StatusBadRequest)
		var fields []string
		for _, p := range e.Problems {
			assert.NotEmpty(t, p.Message, p.Field)
			fields = append(fields, p.Field)
		}
		assert.ElementsMatch(t, []string{"id", "nodes[0].kind", "nodes[1].deps[0]", "nodes[1].max_attempts"}, fields)
	})

	// Every refused spec of the spec suite gets exactly the problems its
	// .err file lists, as the CLI prints them: one judge, one set of words.
	t.Run("the spec suite's problems", func(t *testing.T) {
		t.Parallel()
		files, err := filepath.Glob(filepath.Join("..", "..", "spec", "testdata", "specs", "bad", "*.err"))
		require.NoError(t, err)
		require.NotEmpty(t, files)
		for _, golden := range files {
			f := strings.TrimSuffix(golden, ".err")
			body, err := os.ReadFile(f)
			require.NoError(t, err)
			want, err := os.ReadFile(golden)
			require.NoError(t, err)
			req := b.request(t, "POST", "/v1/runs", string(body))
			switch filepath.Ext(f) { // as enqueue submit tells formats apart
			case ".json":
				req.Header.Set("Content-Type", "application/json")
			case ".yaml":
				req.Header.Set("Content-Type", "application/yaml")
			default:
				req.Header.Del("Content-Type")
			}
			resp, raw := send(t, req)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", f, raw)
			var e admin.ErrorBody
			require.NoError(t, json.Unmarshal(raw, &e), f)
			var got []string
			for _, p := range e.Problems {
				got = append(got, p.Field+": "+p.Message)
			}
			assert.Equal(t, strings.TrimSpace(string(want)), strings.Join(got, "\n"), f)
		}
	})

	cases := []struct {
		name, method, path, body string
		want                     int
		field                    string // a problem naming this field, if set
		says                     string // the error mentions this, if set
	}{
		{"unknown spec field", "POST", "/v1/runs", `{"nodes": [{"id": "a", "kind": "noop", "max_attempt": 3}]}`, 400, "spec", "max_attempt"},
		{"not JSON", "POST", "/v1/runs", `{"nodes": [`, 400, "spec", ""},
		{"empty body", "POST", "/v1/runs", "", 400, "spec", "empty"},
		{"no nodes", "POST", "/v1/runs", `{"nodes": []}`, 400, "nodes", ""},
		{"cycle", "POST", "/v1/runs", `{"nodes": [{"id": "a", "kind": "noop", "deps": ["b"]}, {"id": "b", "kind": "noop", "deps": ["a"]}]}`, 400, "nodes", "cycle"},
		{"invalid run id", "GET", "/v1/runs/bad%7Bid", "", 400, "path.id", "is not allowed (allowed: A-Z a-z 0-9 . _ -, and not only dots)"},
		{"invalid run id on events", "GET", "/v1/runs/a%20b/events", "", 400, "path.id", "is not allowed (allowed: A-Z a-z 0-9 . _ -, and not only dots)"},
		{"invalid run id on cancel", "POST", "/v1/runs/a:b/cancel", "", 400, "path.id", "is not allowed (allowed: A-Z a-z 0-9 . _ -, and not only dots)"},
		{"unknown run", "GET", "/v1/runs/nope", "", 404, "", "not found"},
		{"unknown run events", "GET", "/v1/runs/nope/events", "", 404, "", "not found"},
		{"unknown run cancel", "POST", "/v1/runs/nope/cancel", "", 404, "", "not found"},
		{"bad after", "GET", "/v1/runs/exists/events?after=abc", "", 400, "", "after"},
		{"zero limit", "GET", "/v1/runs/exists/events?limit=0", "", 400, "", "limit"},
		{"huge limit", "GET", "/v1/runs?limit=99999", "", 400, "", "limit"},
		{"bad status", "GET", "/v1/runs?status=bogus", "", 400, "", "status"},
		{"bad thread", "GET", "/v1/runs?thread=a%20b", "", 400, "query.thread", ""},
		{"cancel body with unknown field", "POST", "/v1/runs/exists/cancel", `{"why": "x"}`, 400, "body", "'why' not allowed"},
		{"cancel body not JSON", "POST", "/v1/runs/exists/cancel", `{"reason": `, 400, "body", ""},
		{"follow neither true nor false", "GET", "/v1/runs/exists/events?follow=maybe", "", 400, "query.follow", ""},
		{"limit not a number", "GET", "/v1/runs?limit=ten", "", 400, "query.limit", ""},
		{"resume value missing its body", "POST", "/v1/runs/exists/nodes/a/resume", "", 400, "body", ""},
		{"cancel reason too long", "POST", "/v1/runs/exists/cancel", `{"reason": "` + strings.Repeat("x", 2000) + `"}`, 400, "", "reason"},
		{"wrong method", "PUT", "/v1/runs/exists", "", 405, "", "PUT"},
		{"delete of a running run", "DELETE", "/v1/runs/exists", "", 409, "", "cancel it first"},
		{"delete of an unknown run", "DELETE", "/v1/runs/nope", "", 404, "", "run nope not found"},
		{"wrong method on the collection", "PUT", "/v1/runs", "", 405, "", "PUT"},
		{"unknown route", "GET", "/v1/nothing", "", 404, "", "no route"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := b.errorBody(t, tc.method, tc.path, tc.body, tc.want)
			if tc.field != "" {
				var fields []string
				for _, p := range e.Problems {
					fields = append(fields, p.Field)
				}
				assert.Contains(t, fields, tc.field)
			}
			if tc.says != "" {
				assert.Contains(t, e.Error, tc.says)
			}
		})
	}

	t.Run("a header breaking the document is named", func(t *testing.T) {
		t.Parallel()
		req := b.request(t, "POST", "/v1/runs/exists/retry", "")
		req.Header.Set("Idempotency-Key", "not ok")
		resp, raw := send(t, req)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", raw)
		var e admin.ErrorBody
		require.NoError(t, json.Unmarshal(raw, &e))
		require.NotEmpty(t, e.Problems)
		assert.Equal(t, "header.Idempotency-Key", e.Problems[0].Field)
	})

	t.Run("the document is served, without a token", func(t *testing.T) {
		t.Parallel()
		resp, raw := send(t, b.request(t, "GET", admin.OpenAPIPath, ""))
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		assert.JSONEq(t, string(admin.OpenAPI()), string(raw))
	})

	t.Run("the run spec's JSON Schema is served, without a token", func(t *testing.T) {
		t.Parallel()
		req, err := http.NewRequest("GET", b.url+admin.SchemaPath, nil)
		require.NoError(t, err)
		resp, raw := send(t, req)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "application/schema+json", resp.Header.Get("Content-Type"))
		assert.JSONEq(t, string(spec.Schema()), string(raw))
		assert.Contains(t, string(raw), `"$schema": "https://json-schema.org/draft/2020-12/schema"`)
	})

	t.Run("wrong method lists the allowed ones", func(t *testing.T) {
		t.Parallel()
		resp := b.call(t, "GET", "/v1/runs/exists/cancel", "", http.StatusMethodNotAllowed, &admin.ErrorBody{})
		assert.Equal(t, "POST", resp.Header.Get("Allow"))
	})

	t.Run("YAML specs are accepted", func(t *testing.T) {
		t.Parallel()
		var sub admin.SubmitBody
		b.call(t, "POST", "/v1/runs", "id: yaml-1\nnodes:\n  - id: a\n    kind: noop\n", http.StatusCreated, &sub)
		assert.Equal(t, "yaml-1", sub.RunID)
	})
}

// A body over MaxBodyBytes is refused with 413, whether it announces its
// length or streams without one.
func TestBodyLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, options{maxBody: 1024})
	big := `{"reason": "` + strings.Repeat("x", 2048) + `"}`

	e := b.errorBody(t, "POST", "/v1/runs/r1/cancel", big, http.StatusRequestEntityTooLarge)
	assert.Contains(t, e.Error, "1024")

	req := b.request(t, "POST", "/v1/runs/r1/cancel", "")
	req.Body = io.NopCloser(strings.NewReader(big)) // no length: sent chunked
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/json")
	resp, raw := send(t, req)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "%s", raw)
}

// A spec over the client's MaxSpecBytes (MAX_SPEC_BYTES) is refused with
// 413 naming its size and the cap, the words the CLI and the Go client
// use; a spec is not held to the cap of other bodies.
func TestSpecSizeLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, options{maxSpec: 1024, maxBody: 512})
	big := `{"nodes": [{"id": "a", "kind": "noop", "input": "` + strings.Repeat("x", 2048) + `"}]}`

	e := b.errorBody(t, "POST", "/v1/runs", big, http.StatusRequestEntityTooLarge)
	assert.Equal(t, fmt.Sprintf("spec: %d bytes, at most 1024 (MAX_SPEC_BYTES)", len(big)), e.Error)

	req := b.request(t, "POST", "/v1/runs", "")
	req.Body = io.NopCloser(strings.NewReader(big)) // no length: sent chunked
	req.ContentLength = -1
	resp, raw := send(t, req)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "%s", raw)
	assert.Contains(t, string(raw), "more than 1024 bytes, at most 1024 (MAX_SPEC_BYTES)")

	var list admin.ListBody
	b.call(t, "GET", "/v1/runs", "", http.StatusOK, &list)
	assert.Empty(t, list.Runs, "nothing was stored")

	// Under the cap (and over the 512 bytes of other bodies) it is stored.
	ok := `{"nodes": [{"id": "a", "kind": "noop", "input": "` + strings.Repeat("x", 600) + `"}]}`
	b.call(t, "POST", "/v1/runs", ok, http.StatusCreated, nil)
}

// The default spec cap is 8 MiB.
func TestBodyLimitDefault(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	body := `{"nodes": [{"id": "a", "kind": "noop", "input": "` + strings.Repeat("x", spec.DefaultMaxSpecBytes) + `"}]}`
	e := b.errorBody(t, "POST", "/v1/runs", body, http.StatusRequestEntityTooLarge)
	assert.Contains(t, e.Error, "at most 8388608 (MAX_SPEC_BYTES)")
}
