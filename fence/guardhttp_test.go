package fence_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
)

// TestGuardHTTP: the status a caller gets for each kind of token, whether
// the side effect (next) ran, and the token it ran under.
func TestGuardHTTP(t *testing.T) {
	t.Parallel()
	// seeded is a guard that has admitted pay/charge@2/c2.
	seeded := func(t *testing.T) fence.Admitter {
		g := fence.NewMemoryGuard()
		require.NoError(t, g.Admit(t.Context(), gtok("pay", "charge", 2, "c2")))
		return g
	}
	// down is a Guard whose Redis is gone.
	down := func(t *testing.T) fence.Admitter {
		m, rdb := redistest.Mini(t)
		m.SetError("LOADING Redis is loading the dataset in memory")
		return fence.NewGuard(rdb, nil)
	}
	cases := []struct {
		name     string
		guard    func(*testing.T) fence.Admitter
		headers  []string
		optional bool
		status   int
		ran      *fence.Token // nil: next must not run
		errText  string       // in the JSON error
		warned   bool         // a refusal is logged as a Warn
	}{
		{name: "owner retrying", guard: seeded, headers: []string{"pay/charge@2/c2"},
			status: http.StatusOK, ran: &fence.Token{Run: "pay", Node: "charge", Epoch: 2, ClaimID: "c2"}},
		{name: "newer owner", guard: seeded, headers: []string{"pay/charge@3/c3"},
			status: http.StatusOK, ran: &fence.Token{Run: "pay", Node: "charge", Epoch: 3, ClaimID: "c3"}},
		{name: "stale epoch", guard: seeded, headers: []string{"pay/charge@1/c1"},
			status: http.StatusConflict, errText: "fence: stale epoch", warned: true},
		{name: "same epoch, other claim", guard: seeded, headers: []string{"pay/charge@2/zz"},
			status: http.StatusServiceUnavailable, errText: "fence: not owner", warned: true},
		{name: "missing", guard: seeded,
			status: http.StatusBadRequest, errText: "missing Baton-Fencing-Token"},
		{name: "missing, optional", guard: seeded, optional: true,
			status: http.StatusOK, ran: &fence.Token{}},
		{name: "malformed", guard: seeded, headers: []string{"pay/charge"},
			status: http.StatusBadRequest, errText: "missing @epoch"},
		{name: "bad epoch", guard: seeded, headers: []string{"pay/charge@0/c"},
			status: http.StatusBadRequest, errText: "not a positive integer"},
		{name: "bad claim id", guard: seeded, headers: []string{"pay/charge@3/a{b}"},
			status: http.StatusBadRequest, errText: "invalid id"},
		{name: "repeated header", guard: seeded, headers: []string{"pay/charge@3/c3", "pay/charge@4/c4"},
			status: http.StatusBadRequest, errText: "more than one"},
		{name: "guard unavailable", guard: down, headers: []string{"pay/charge@3/c3"},
			status: http.StatusServiceUnavailable, errText: "fence: guard unavailable"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var ran *fence.Token
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tok, ok := fence.TokenFrom(r.Context())
				require.Equal(t, len(c.headers) > 0, ok, "a token in the context iff one was sent")
				ran = &tok
				_, _ = w.Write([]byte("done"))
			})
			var logs bytes.Buffer
			h := fence.GuardHTTP(c.guard(t), next, &fence.GuardHTTPOptions{
				Optional: c.optional, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			})
			req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/charge", nil)
			for _, v := range c.headers {
				req.Header.Add(fence.HeaderFencingToken, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)

			require.Equal(t, c.status, rec.Code, rec.Body.String())
			require.Equal(t, c.ran, ran, "next ran under this token")
			if c.ran != nil {
				require.Equal(t, "done", rec.Body.String())
				return
			}
			require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
			var body struct{ Error string }
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
			require.Contains(t, body.Error, c.errText)
			require.Equal(t, c.warned, bytes.Contains(logs.Bytes(), []byte("level=WARN msg=fencing_token_refused")), logs.String())
		})
	}
}

// TestGuardHTTPHidesRedisErrors: a 503 tells the caller to come back, not
// where the service's Redis lives; the detail is logged.
func TestGuardHTTPHidesRedisErrors(t *testing.T) {
	t.Parallel()
	m, rdb := redistest.Mini(t)
	const detail = "ERR replica 10.1.2.3:6379 is read-only"
	m.SetError(detail)

	var logs bytes.Buffer
	h := fence.GuardHTTP(fence.NewGuard(rdb, nil), http.NotFoundHandler(),
		&fence.GuardHTTPOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/charge", nil)
	req.Header.Set(fence.HeaderFencingToken, "pay/charge@1/c1")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)

	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.NotContains(t, rec.Body.String(), "10.1.2.3")
	require.Contains(t, logs.String(), "level=ERROR msg=fencing_guard_failed")
	require.Contains(t, logs.String(), "10.1.2.3", "the detail is logged")
}
