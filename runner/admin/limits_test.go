package admin_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/runner/admin"
)

// Limits set, read and deleted through the HTTP API; bad ones answer 400
// naming the field and change nothing. Responses are checked against
// openapi.json by the test server.
func TestLimitsAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	b.call(t, "PUT", "/v1/limits", `{"name": "openai", "concurrency": 3, "rate": "600/m", "burst": 10}`, http.StatusOK, nil)
	b.call(t, "PUT", "/v1/limits/tenant:*", `{"concurrency": 1}`, http.StatusOK, nil)

	var list admin.LimitsBody
	b.call(t, "GET", "/v1/limits", "", http.StatusOK, &list)
	require.Len(t, list.Limits, 2)
	require.Equal(t, "openai", list.Limits[0].Name)
	require.Equal(t, "600/m", list.Limits[0].RateString())
	require.Equal(t, 3, list.Limits[0].Concurrency)
	require.Equal(t, 10, list.Limits[0].Burst)

	for _, bad := range []struct{ body, want string }{
		{`{"name": "openai", "concurrency": 0}`, "concurrency: 0"},
		{`{"name": "openai", "concurrency": -2}`, "concurrency: -2"},
		{`{"name": "openai", "rate": "10/fortnight"}`, "fortnight"},
		{`{"name": "openai", "rate": "20/s", "colour": "red"}`, "colour"},
		{`{"name": "a{b}", "concurrency": 1}`, "name"},
	} {
		resp, raw := send(t, b.request(t, "PUT", "/v1/limits", bad.body))
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", bad.body, raw)
		require.Contains(t, string(raw), bad.want)
	}
	var one struct {
		Concurrency int    `json:"concurrency"`
		Rate        string `json:"rate"`
	}
	b.call(t, "GET", "/v1/limits/openai", "", http.StatusOK, &one)
	require.Equal(t, 3, one.Concurrency, "a refused PUT changed nothing")
	require.Equal(t, "600/m", one.Rate)

	b.call(t, "DELETE", "/v1/limits/openai", "", http.StatusOK, nil)
	b.call(t, "DELETE", "/v1/limits/openai", "", http.StatusNotFound, nil)
	b.call(t, "GET", "/v1/limits/openai", "", http.StatusNotFound, nil)
}
