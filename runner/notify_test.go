package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/egress"
	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
)

const webhookSecret = "whsec-test-0123456789"

// delivery is one POST a test receiver got.
type delivery struct {
	id, signature string
	body          []byte
	verifyErr     error
}

// receiver answers the first fail POSTs with 500, the rest with 204, and
// hands every POST to the test.
func receiver(t *testing.T, fail int) (*httptest.Server, <-chan delivery) {
	got := make(chan delivery, 16)
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		sig := r.Header.Get(runner.SignatureHeader)
		got <- delivery{id: r.Header.Get(runner.DeliveryHeader), signature: sig, body: body,
			verifyErr: runner.VerifyWebhook(webhookSecret, sig, body, 5*time.Minute)}
		mu.Lock()
		n++
		failing := n <= fail
		mu.Unlock()
		if failing {
			http.Error(w, "receiver down", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func (b *testBundle) notifier(secret string) *runner.Notifier {
	return b.notifierTo(secret, "127.0.0.1") // the receivers run here
}

// notifierTo is a Notifier whose webhooks may reach allow (EGRESS_ALLOW).
func (b *testBundle) notifierTo(secret, allow string) *runner.Notifier {
	b.t.Helper()
	pol, err := egress.Parse("EGRESS_ALLOW", allow)
	require.NoError(b.t, err)
	n, err := runner.NewNotifier(runner.NotifierConfig{Redis: b.rdb, Secret: secret, Interval: 20 * time.Millisecond,
		PollInterval: 10 * time.Millisecond, RetryBase: 50 * time.Millisecond, RetryMax: 100 * time.Millisecond,
		Logger: b.log, Egress: pol})
	require.NoError(b.t, err)
	return n
}

func next(t *testing.T, got <-chan delivery) delivery {
	t.Helper()
	select {
	case d := <-got:
		return d
	case <-time.After(15 * time.Second):
		t.Fatal("no webhook delivered within 15s")
		return delivery{}
	}
}

// A run that ends is POSTed to its notify URL, signed with the shared
// secret; a receiver that fails is tried again, with the same delivery id,
// until it answers 2xx; the record then says when it was delivered.
func TestWebhookSignedAndRetried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hook, got := receiver(t, 1)
	b.worker(b.fastConfig("w-hook"), map[string]runner.Kind{"ok": okKind(), "boom": failKind()})
	n := b.notifier(webhookSecret)
	require.NoError(t, n.Start(context.Background()))
	t.Cleanup(n.Shutdown)

	b.submit(`{"id": "hooked", "notify": {"url": "` + hook.URL + `/baton"}, "nodes": [
		{"id": "a", "kind": "ok"}, {"id": "b", "kind": "boom", "max_attempts": 1}, {"id": "c", "kind": "ok", "deps": ["b"]}]}`)

	first := next(t, got)
	second := next(t, got) // after the 500
	for _, d := range []delivery{first, second} {
		require.NoError(t, d.verifyErr, "signature %q", d.signature)
		assert.Equal(t, "notify:hooked:hooked", d.id)
	}
	var p runner.WebhookPayload
	require.NoError(t, json.Unmarshal(second.body, &p))
	assert.Equal(t, "run.finished", p.Type)
	assert.Equal(t, "hooked", p.Run)
	assert.Equal(t, "FAILED", p.Status)
	assert.Equal(t, map[string]int{"SUCCEEDED": 1, "FAILED": 1, "CANCELLED": 1}, p.Nodes)
	assert.Equal(t, []string{"b"}, p.Failed)
	require.NotNil(t, p.FinishedAt)

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		rec, err := b.client.Store().NotifyRecordOf(context.Background(), "hooked", "hooked")
		require.NoError(c, err)
		assert.False(c, rec.DeliveredAt.IsZero())
		assert.EqualValues(c, 2, rec.Attempts)
		assert.Contains(c, rec.LastError, "500")
	}, 10*time.Second, 10*time.Millisecond, "the delivery record: what an operator reads")

	// A body or a secret that is not the sender's fails verification.
	assert.ErrorIs(t, runner.VerifyWebhook(webhookSecret, second.signature, append(second.body, ' '), time.Minute), runner.ErrBadSignature)
	assert.ErrorIs(t, runner.VerifyWebhook("another-secret", second.signature, second.body, time.Minute), runner.ErrBadSignature)
	old := runner.SignWebhook(webhookSecret, time.Now().Add(-time.Hour), second.body)
	assert.ErrorIs(t, runner.VerifyWebhook(webhookSecret, old, second.body, 5*time.Minute), runner.ErrBadSignature, "a replay an hour later")
}

// A run that ended while no notifier ran (the process that ended it died,
// or the run was cancelled by a client) is notified by the next notifier
// that scans; two notifiers scanning the same run queue it once.
func TestWebhookBackstopAndDedupe(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hook, got := receiver(t, 0)
	b.submit(`{"id": "lonely", "notify": {"url": "` + hook.URL + `"}, "nodes": [{"id": "a", "kind": "ok"}]}`)
	_, err := b.client.Cancel(context.Background(), "lonely", "nobody runs it")
	require.NoError(t, err)

	n1, n2 := b.notifier(webhookSecret), b.notifier(webhookSecret)
	require.NoError(t, n1.Scan(context.Background()))
	// The same spec again re-arms the pending entry; a second scan finds
	// the delivery queued already.
	b.submit(`{"id": "lonely", "notify": {"url": "` + hook.URL + `"}, "nodes": [{"id": "a", "kind": "ok"}]}`)
	require.NoError(t, n2.Scan(context.Background()))
	insp := asynq.NewInspectorFromRedisClient(b.rdb)
	pending, err := insp.ListPendingTasks(runner.DefaultNotifyQueue)
	require.NoError(t, err)
	require.Len(t, pending, 1, "one delivery queued")

	require.NoError(t, n2.Start(context.Background()))
	t.Cleanup(n2.Shutdown)
	d := next(t, got)
	require.NoError(t, d.verifyErr)
	var p runner.WebhookPayload
	require.NoError(t, json.Unmarshal(d.body, &p))
	assert.Equal(t, "CANCELLED", p.Status)
	assert.Equal(t, "nobody runs it", p.CancelReason)

	// Once delivered, the task is kept completed (its id stays taken) and
	// nothing else is queued.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		done, err := insp.ListCompletedTasks(runner.DefaultNotifyQueue)
		require.NoError(c, err)
		assert.Len(c, done, 1)
	}, 10*time.Second, 10*time.Millisecond)
	pending, err = insp.ListPendingTasks(runner.DefaultNotifyQueue)
	require.NoError(t, err)
	assert.Empty(t, pending)
	select {
	case d := <-got:
		t.Fatalf("a second delivery: %s", d.body)
	default:
	}
}

// A spec's notify is checked like every other field, naming it.
func TestNotifySpecValidation(t *testing.T) {
	t.Parallel()
	for spec, want := range map[string]string{
		`{"notify": {"url": "ftp://x.example/hook"}, "nodes": [{"id": "a", "kind": "ok"}]}`:                                `notify.url: scheme "ftp": want http or https`,
		`{"notify": {"url": ""}, "nodes": [{"id": "a", "kind": "ok"}]}`:                                                    "notify.url: missing",
		`{"notify": {"url": "https://x.example/` + strings.Repeat("a", 2100) + `"}, "nodes": [{"id": "a", "kind": "ok"}]}`: "notify.url: 2118 bytes, at most 2048",
		`{"notify": "https://x.example", "nodes": [{"id": "a", "kind": "ok"}]}`:                                            "notify: want an object",
		`{"notify": {"url": "https://u:p@x.example"}, "nodes": [{"id": "a", "kind": "ok"}]}`:                               "notify.url: no user:password",
		`{"notify": {"uri": "https://x.example"}, "nodes": [{"id": "a", "kind": "ok"}]}`:                                   "notify.uri",
		`{"notify": {"url": "/relative"}, "nodes": [{"id": "a", "kind": "ok"}]}`:                                           `notify.url: scheme ""`,
	} {
		s, err := runner.ParseSpec([]byte(spec))
		if err == nil {
			err = s.Validate(runner.Limits{})
		}
		require.Error(t, err, spec)
		assert.True(t, errors.Is(err, runner.ErrInvalidSpec), "%v", err)
		assert.Contains(t, err.Error(), want)
	}
	s, err := runner.ParseSpec([]byte(`notify: {url: "https://hooks.example.com/baton"}
nodes: [{id: a, kind: ok}]`))
	require.NoError(t, err)
	require.NoError(t, s.Validate(runner.Limits{}))
	assert.Equal(t, "https://hooks.example.com/baton", s.Notify.URL)
}

// A resubmit with another notify URL is another spec: a conflict, and the
// first URL stays.
func TestNotifyIsPartOfTheRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.submit(`{"id": "n1", "notify": {"url": "https://a.example/hook"}, "nodes": [{"id": "a", "kind": "ok"}]}`)
	s, err := runner.ParseSpec([]byte(`{"id": "n1", "notify": {"url": "https://b.example/hook"}, "nodes": [{"id": "a", "kind": "ok"}]}`))
	require.NoError(t, err)
	_, err = b.client.Submit(context.Background(), s)
	require.ErrorIs(t, err, fence.ErrRunConflict)
	rec, err := b.client.Store().NotifyRecordOf(context.Background(), "n1", "n1")
	require.NoError(t, err)
	assert.Equal(t, "https://a.example/hook", rec.URL)

	// A run first submitted without notify cannot gain one by a resubmit.
	b.submit(`{"id": "n2", "nodes": [{"id": "a", "kind": "ok"}]}`)
	s, err = runner.ParseSpec([]byte(`{"id": "n2", "notify": {"url": "https://b.example/hook"}, "nodes": [{"id": "a", "kind": "ok"}]}`))
	require.NoError(t, err)
	_, err = b.client.Submit(context.Background(), s)
	require.ErrorIs(t, err, fence.ErrRunConflict)
	_, err = b.client.Store().NotifyRecordOf(context.Background(), "n2", "n2")
	require.ErrorIs(t, err, fence.ErrNotFound, "the refused resubmit left no record")
}

func okKind() runner.Kind {
	return runner.KindFunc(func(context.Context, *runner.Task) (json.RawMessage, error) {
		return json.RawMessage(`true`), nil
	})
}

func failKind() runner.Kind {
	return runner.KindFunc(func(context.Context, *runner.Task) (json.RawMessage, error) {
		return nil, errors.New("boom")
	})
}

// A webhook aimed at loopback (the runner's own admin server, say) is
// refused by the dialer unless the operator allows the address, and the
// refusal is not retried: the receiver is never called, and the record
// says why.
func TestWebhookToAPrivateAddressIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hook, got := receiver(t, 0)
	b.worker(b.fastConfig("w-ssrf"), map[string]runner.Kind{"ok": okKind()})
	n := b.notifierTo(webhookSecret, "")
	require.NoError(t, n.Start(context.Background()))
	t.Cleanup(n.Shutdown)
	// By name, so that only the dialer, after resolving, can tell.
	url := strings.Replace(hook.URL, "127.0.0.1", "localhost", 1)
	b.submit(`{"id": "ssrf", "notify": {"url": "` + url + `/pause"}, "nodes": [{"id": "a", "kind": "ok"}]}`)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		rec, err := b.client.Store().NotifyRecordOf(context.Background(), "ssrf", "ssrf")
		require.NoError(c, err)
		assert.Contains(c, rec.LastError, "address refused")
		assert.EqualValues(c, 1, rec.Attempts)
	}, 10*time.Second, 10*time.Millisecond)
	assert.Empty(t, got)
}
