package agentapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/internal/redistest"
)

// storeGraphs serves a project of fixed graph ids.
type storeGraphs []string

func (g storeGraphs) IDs() []string { return g }
func (g storeGraphs) Call(context.Context, string, any) (json.RawMessage, error) {
	return nil, nil
}

// storeServer starts the API over rdb, with graphs "agent" and "other".
func storeServer(t *testing.T, rdb redis.UniversalClient) (*httptest.Server, *client.Client) {
	t.Helper()
	c, err := client.New(client.Config{Redis: rdb})
	require.NoError(t, err)
	s, err := New(Config{Client: c, Graphs: storeGraphs{"agent", "other"}})
	require.NoError(t, err)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts, c
}

// storeCall sends method path with body (JSON text, "" for none) and returns
// the status and the body.
func storeCall(t *testing.T, ts *httptest.Server, method, path, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, ts.URL+path, rd)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// The store routes as LangGraph's SDKs call them, on miniredis and a real
// redis-server.
func TestStoreRoutes(t *testing.T) {
	t.Parallel()
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ts, _ := storeServer(t, b.Client)
			code, body := storeCall(t, ts, "PUT", "/store/items", `{"namespace":["users","u1"],"key":"prefs","value":{"theme":"dark","n":3}}`)
			require.Equal(t, http.StatusNoContent, code, body)
			code, _ = storeCall(t, ts, "PUT", "/store/items", `{"namespace":["users","u2"],"key":"prefs","value":{"theme":"light","n":7},"ttl":5,"index":false}`)
			require.Equal(t, http.StatusNoContent, code)

			code, body = storeCall(t, ts, "GET", "/store/items?"+url.Values{"namespace": {"users.u1"}, "key": {"prefs"}}.Encode(), "")
			require.Equal(t, http.StatusOK, code)
			var it map[string]any
			require.NoError(t, json.Unmarshal([]byte(body), &it))
			require.Equal(t, []any{"users", "u1"}, it["namespace"])
			require.Equal(t, "prefs", it["key"])
			require.Equal(t, map[string]any{"theme": "dark", "n": 3.0}, it["value"])
			require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`, it["created_at"])
			require.Contains(t, it, "updated_at")

			code, body = storeCall(t, ts, "GET", "/store/items?namespace=users.u9&key=prefs", "")
			require.Equal(t, http.StatusOK, code)
			require.Equal(t, "null", strings.TrimSpace(body), "a missing item is null, as the reference answers")

			code, body = storeCall(t, ts, "POST", "/store/items/search", `{"namespace_prefix":["users"],"filter":{"n":{"$gt":5}}}`)
			require.Equal(t, http.StatusOK, code)
			var found struct {
				Items []map[string]any `json:"items"`
			}
			require.NoError(t, json.Unmarshal([]byte(body), &found))
			require.Len(t, found.Items, 1)
			require.Equal(t, []any{"users", "u2"}, found.Items[0]["namespace"])

			code, body = storeCall(t, ts, "POST", "/store/items/search", `{"namespace_prefix":["users"],"limit":1,"offset":1}`)
			require.Equal(t, http.StatusOK, code)
			require.NoError(t, json.Unmarshal([]byte(body), &found))
			require.Len(t, found.Items, 1)
			require.Equal(t, []any{"users", "u2"}, found.Items[0]["namespace"])

			code, body = storeCall(t, ts, "POST", "/store/namespaces", `{"prefix":["users"],"max_depth":2}`)
			require.Equal(t, http.StatusOK, code)
			require.JSONEq(t, `{"namespaces":[["users","u1"],["users","u2"]]}`, body)
			code, body = storeCall(t, ts, "POST", "/store/namespaces", `{"suffix":["u2"]}`)
			require.Equal(t, http.StatusOK, code)
			require.JSONEq(t, `{"namespaces":[["users","u2"]]}`, body)

			code, _ = storeCall(t, ts, "DELETE", "/store/items", `{"namespace":["users","u1"],"key":"prefs"}`)
			require.Equal(t, http.StatusNoContent, code)
			code, body = storeCall(t, ts, "GET", "/store/items?namespace=users.u1&key=prefs", "")
			require.Equal(t, http.StatusOK, code)
			require.Equal(t, "null", strings.TrimSpace(body))
			code, body = storeCall(t, ts, "POST", "/store/namespaces", `{}`)
			require.Equal(t, http.StatusOK, code)
			require.JSONEq(t, `{"namespaces":[["users","u2"]]}`, body)
		})
	}
}

// Bad input gets the reference's status and a message naming what is
// wrong; nothing is stored.
func TestStoreRoutesBadInput(t *testing.T) {
	t.Parallel()
	_, rdb := redistest.Mini(t)
	ts, _ := storeServer(t, rdb)
	for _, c := range []struct {
		method, path, body string
		code               int
		msg                string
	}{
		{"PUT", "/store/items", `{"namespace":[],"key":"k","value":{}}`, 400, "Namespace is required"},
		{"PUT", "/store/items", `{"namespace":["a.b"],"key":"k","value":{}}`, 422, "cannot contain periods"},
		{"PUT", "/store/items", `{"namespace":["a",""],"key":"k","value":{}}`, 422, "cannot be empty"},
		{"PUT", "/store/items", `{"namespace":["a"],"key":"k","value":[1]}`, 422, "value: expected an object"},
		{"PUT", "/store/items", `{"namespace":["a"],"value":{}}`, 422, "key: required"},
		{"PUT", "/store/items", `{"namespace":["a"],"key":3,"value":{}}`, 422, "key: expected string"},
		{"PUT", "/store/items", `{"namespace":`, 422, "not JSON"},
		{"DELETE", "/store/items", `{"key":"k"}`, 400, "Namespace is required"},
		{"GET", "/store/items?namespace=a", "", 422, "key: required"},
		{"POST", "/store/items/search", `{"namespace_prefix":"a"}`, 422, "namespace_prefix: expected []string"},
		{"POST", "/store/items/search", `{"filter":{"a":{"$in":[1]}}}`, 422, "$in is not supported"},
		{"POST", "/store/items/search", `{"limit":-1}`, 422, "limit"},
		{"POST", "/store/namespaces", `{"prefix":["a.b"]}`, 422, "cannot contain periods"},
	} {
		code, body := storeCall(t, ts, c.method, c.path, c.body)
		require.Equal(t, c.code, code, "%s %s %s: %s", c.method, c.path, c.body, body)
		require.Contains(t, body, c.msg, "%s %s %s", c.method, c.path, c.body)
	}
	code, body := storeCall(t, ts, "POST", "/store/namespaces", `{}`)
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"namespaces":[]}`, body)
}
