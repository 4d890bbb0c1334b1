package admin_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner/admin"
)

// A CANCELLED run is retried through the API; the same Idempotency-Key
// again, or another request once it runs, is answered 200 as already
// done; a run with nothing to re-run is a conflict.
func TestRetryThroughTheAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, options{real: true})
	b.call(t, "POST", "/v1/runs", twoNodes, http.StatusCreated, nil)
	b.call(t, "POST", "/v1/runs/rt-1/cancel", "", http.StatusOK, nil)

	retry := func(key string) admin.RetryBody {
		t.Helper()
		req := b.request(t, "POST", "/v1/runs/rt-1/retry", "")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, raw := send(t, req)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
		var out admin.RetryBody
		require.NoError(t, json.Unmarshal(raw, &out))
		return out
	}
	assert.Equal(t, admin.RetryBody{ID: "rt-1", Status: "RUNNING", Ready: []string{"a"}}, retry("key-1"))
	var info fence.RunInfo
	b.call(t, "GET", "/v1/runs/rt-1", "", http.StatusOK, &info)
	assert.Equal(t, "RUNNING", info.Status)
	assert.False(t, info.Cancelled)
	assert.Equal(t, "READY", info.Nodes[0].State)
	assert.Equal(t, "BLOCKED", info.Nodes[1].State)

	assert.True(t, retry("key-1").Already)
	assert.True(t, retry("").Already)

	b.errorBody(t, "POST", "/v1/runs/nope/retry", "", http.StatusNotFound)
	b.errorBody(t, "GET", "/v1/runs/rt-1/retry", "", http.StatusMethodNotAllowed)
}
