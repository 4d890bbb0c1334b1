package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/runner"
)

// The runner binary delivers a run's webhook signed with WEBHOOK_SECRET.
func TestBinaryWebhook(t *testing.T) {
	t.Parallel()
	const secret = "binary-webhook-secret-0123"
	type hit struct {
		body []byte
		sig  string
	}
	got := make(chan hit, 4)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- hit{b, r.Header.Get(runner.SignatureHeader)}
	}))
	defer hook.Close()
	srv := redistest.Start(t)
	p := start(t, map[string]string{"REDIS_URL": srv.URL(), "ADMIN_ADDR": "", "WEBHOOK_SECRET": secret, "EGRESS_ALLOW": "127.0.0.1"})
	p.waitLog(t, "runner_ready")

	c, err := runner.NewClient(runner.ClientConfig{Redis: srv.Client(t)})
	require.NoError(t, err)
	defer c.Close()
	spec, err := runner.ParseSpec([]byte(`{"id": "bin-hook", "notify": {"url": "` + hook.URL + `"},
		"nodes": [{"id": "a", "kind": "noop"}]}`))
	require.NoError(t, err)
	_, err = c.Submit(t.Context(), spec)
	require.NoError(t, err)

	var h hit
	select {
	case h = <-got:
	case <-time.After(20 * time.Second):
		t.Fatalf("no webhook; runner log:\n%s", p.log())
	}
	require.NoError(t, runner.VerifyWebhook(secret, h.sig, h.body, time.Minute))
	var payload runner.WebhookPayload
	require.NoError(t, json.Unmarshal(h.body, &payload))
	assert.Equal(t, "SUCCEEDED", payload.Status)
	assert.Equal(t, "bin-hook", payload.Run)
	p.waitLog(t, "webhook_delivered")
	assert.Equal(t, exitOK, p.exitAfter(t, syscall.SIGTERM))
}
