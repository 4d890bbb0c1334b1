package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/runner"
)

// waitRun polls the run until it has ended and returns it.
func waitRun(t *testing.T, c *runner.Client, run string) *fence.RunInfo {
	t.Helper()
	var info *fence.RunInfo
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var err error
		info, err = c.Status(t.Context(), run)
		require.NoError(ct, err)
		assert.Contains(ct, []string{"SUCCEEDED", "FAILED", "CANCELLED"}, info.Status)
	}, 20*time.Second, 10*time.Millisecond)
	return info
}

// adminPort is a free loopback port for a runner's admin server.
func adminAddr(t *testing.T) string { return fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t)) }

// postRun submits spec through the runner's HTTP API and returns the status
// code and body.
func postRun(t *testing.T, admin, spec string) (int, string) {
	t.Helper()
	resp, err := http.Post("http://"+admin+"/v1/runs", "application/json", strings.NewReader(spec))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// An exec child printing its environment sees PATH and HOME, what the
// operator names (EXEC_ENV) and its lease's BATON_* variables, and none
// of the runner's own settings: not API_TOKEN, WEBHOOK_SECRET, REDIS_URL
// or BATON_REDIS_URL. A command the operator trusts with the store
// (EXEC_STORE_COMMANDS) gets BATON_REDIS_URL, and only that one.
func TestBinaryExecChildEnvIsAnAllowList(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	p := start(t, map[string]string{"REDIS_URL": srv.URL(), "ADMIN_ADDR": "", "API_TOKEN": "tok-0123456789abcdef-xyz",
		"WEBHOOK_SECRET": "whsec-0123456789", "OPERATOR_VAR": "passed", "SOME_OTHER_VAR": "kept-back",
		"EXEC_ENV": "OPERATOR_VAR", "EXEC_STORE_COMMANDS": "printenv"})
	p.waitLog(t, "runner_ready")
	c := newClient(t, srv)
	submit(t, c, `{"id": "env-probe", "nodes": [
		{"id": "env", "kind": "exec", "input": {"command": ["env"], "env": {"MINE": "node-env"}}},
		{"id": "store", "kind": "exec", "input": {"command": ["printenv", "BATON_REDIS_URL"]}}]}`)
	info := waitRun(t, c, "env-probe")
	require.Equal(t, "SUCCEEDED", info.Status, "%+v", info.Nodes)
	var env string
	require.NoError(t, json.Unmarshal(info.Nodes[0].Result, &env))
	for _, want := range []string{"PATH=", "HOME=", "OPERATOR_VAR=passed", "MINE=node-env", "BATON_RUN_ID=env-probe",
		"BATON_FENCING_TOKEN="} {
		assert.Contains(t, env, want)
	}
	for _, never := range []string{"API_TOKEN", "WEBHOOK_SECRET", "REDIS_URL", "SOME_OTHER_VAR", "LOG_FORMAT", "BATON_PREFIX"} {
		assert.NotContains(t, env, never)
	}
	var url string
	require.NoError(t, json.Unmarshal(info.Nodes[1].Result, &url))
	assert.Equal(t, srv.URL(), url, "the trusted command gets the store")
	assert.Equal(t, exitOK, p.exitAfter(t, syscall.SIGTERM))
}

// KINDS=http,sleep,noop leaves exec out: the runner serves no exec node.
// A kind that is not stock, an allow-list entry that is not a CIDR or a
// host, and a relative $file directory stop the start, naming the setting.
func TestBinaryJobSettings(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"KINDS": "exec,shell"}, `KINDS: "shell": not a stock kind`},
		{map[string]string{"EGRESS_ALLOW": "10.0.0.0/33"}, `EGRESS_ALLOW "10.0.0.0/33": not a CIDR`},
		{map[string]string{"EGRESS_ALLOW": "http://hooks.internal"}, `EGRESS_ALLOW "http://hooks.internal"`},
		{map[string]string{"EXEC_FILE_DIRS": "secrets"}, `EXEC_FILE_DIRS "secrets": want an absolute directory`},
		{map[string]string{"EXEC_ENV_REFS": "A=B"}, `EXEC_ENV_REFS "A=B": not a variable name`},
	} {
		code, stderr := exitOf(t, c.env)
		assert.Equal(t, 2, code, "%v: %s", c.env, stderr)
		assert.Contains(t, stderr, c.want)
	}

	srv := redistest.Start(t)
	p := start(t, map[string]string{"REDIS_URL": srv.URL(), "ADMIN_ADDR": "", "KINDS": "http,sleep,noop", "RUNNER_ID": "no-exec"})
	p.waitLog(t, "runner_ready")
	cl := newClient(t, srv)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		ws, err := cl.Workers(t.Context())
		require.NoError(ct, err)
		require.Len(ct, ws, 1)
		assert.Equal(ct, []string{"http", "noop", "sleep"}, ws[0].Kinds)
	}, 10*time.Second, 20*time.Millisecond)
}

// The SSRF probes: an http node and a webhook aimed at the runner's own
// token-less admin server, directly and through a redirect from a host
// the operator allows (127.0.0.2 stands for an outside host).
func TestBinaryOutboundRequestsStayOutOfThePrivateNetwork(t *testing.T) {
	t.Parallel()
	outside, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 here: %v", err)
	}
	srv := redistest.Start(t)
	admin := adminAddr(t)
	target := "http://" + admin + "/monitor/api/queues/default:pause"
	redirector := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target, http.StatusTemporaryRedirect)
	})}
	go func() { _ = redirector.Serve(outside) }()
	t.Cleanup(func() { _ = redirector.Close() })
	via := "http://" + outside.Addr().String() + "/hop"

	// Runs stored before any runner published its policy: nothing is
	// known at submit, and the runner refuses every way in when the
	// nodes run.
	c := newClient(t, srv)
	submit(t, c, `{"id": "ssrf-run", "nodes": [
		{"id": "direct", "kind": "http", "input": {"url": "`+target+`"}},
		{"id": "by-name", "kind": "http", "input": {"url": "http://localhost:`+strings.Split(admin, ":")[1]+`/monitor/api/queues/default:pause"}},
		{"id": "redirect", "kind": "http", "input": {"url": "`+via+`"}},
		{"id": "redirect-followed", "kind": "http", "input": {"url": "`+via+`", "follow_redirects": true}}],
		"notify": {"url": "`+target+`"}}`)
	// A webhook through the outside host's redirect: webhooks follow none.
	submit(t, c, `{"id": "ssrf-hook-hop", "notify": {"url": "`+via+`"}, "nodes": [{"id": "a", "kind": "noop"}]}`)

	p := start(t, map[string]string{"REDIS_URL": srv.URL(), "ADMIN_ADDR": admin, "EGRESS_ALLOW": "127.0.0.2/32"})
	p.waitLog(t, "admin_listening")

	// At submit, through the API: refused, naming the field; nothing stored.
	code, body := postRun(t, admin, `{"id": "ssrf-api", "nodes": [{"id": "a", "kind": "http", "input": {"url": "`+target+`"}}]}`)
	assert.Equal(t, http.StatusBadRequest, code, body)
	assert.Contains(t, body, "nodes[0].input.url")
	assert.Contains(t, body, "EGRESS_ALLOW")
	code, body = postRun(t, admin, `{"id": "ssrf-hook", "notify": {"url": "`+target+`"}, "nodes": [{"id": "a", "kind": "noop"}]}`)
	assert.Equal(t, http.StatusBadRequest, code, body)
	assert.Contains(t, body, "notify.url")
	_, err = c.Status(t.Context(), "ssrf-api")
	require.ErrorIs(t, err, fence.ErrNotFound)
	// Through a Go client, which reads the policy the runner published:
	// refused the same way. (c read the listing before the runner
	// started, and keeps it for a second.)
	_, err = newClient(t, srv).Submit(t.Context(), &runner.RunSpec{ID: "ssrf-client", Notify: &runner.Notify{URL: target},
		Nodes: []runner.NodeSpec{{ID: "a", Kind: "http", Input: json.RawMessage(`{"url": "` + target + `"}`)}}})
	require.ErrorContains(t, err, "nodes[0].input.url: egress: address refused")
	require.ErrorContains(t, err, "notify.url: egress: address refused")
	_, err = c.Status(t.Context(), "ssrf-client")
	require.ErrorIs(t, err, fence.ErrNotFound)

	info := waitRun(t, c, "ssrf-run")
	require.Equal(t, "FAILED", info.Status)
	errs := map[string]string{}
	for _, n := range info.Nodes {
		require.Equal(t, "FAILED", n.State, n.ID)
		require.Equal(t, int64(1), n.Attempt, "%s: a refusal is not retried", n.ID)
		errs[n.ID] = n.Error
	}
	assert.Contains(t, errs["direct"], "address refused")
	assert.Contains(t, errs["by-name"], "address refused")
	assert.Contains(t, errs["redirect"], "not followed")
	assert.Contains(t, errs["redirect-followed"], "address refused")
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		errs := map[string]string{}
		for _, l := range strings.Split(p.log(), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(l), &rec) == nil && rec["msg"] == "webhook_failed" {
				errs[fmt.Sprint(rec["run_id"])] = fmt.Sprint(rec["err"])
			}
		}
		assert.Contains(ct, errs["ssrf-run"], "address refused")
		assert.Contains(ct, errs["ssrf-hook-hop"], "307")
	}, 20*time.Second, 20*time.Millisecond)

	// The admin's queue was never paused.
	resp, err := http.Get("http://" + admin + "/monitor/api/queues")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.NotContains(t, string(b), `"paused":true`)
}

// A {"$file": ...} naming a FIFO is refused at once with a clear error: the
// attempt never hangs. A file outside EXEC_FILE_DIRS and an $env the
// operator did not allow are refused at submit through the API, naming the
// field. The values that were read are redacted from the result, the
// error and the events, as is an operator's named secret (REDACT_ENV).
func TestBinaryFileAndEnvReferences(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	secretFile := filepath.Join(dir, "key")
	require.NoError(t, os.WriteFile(secretFile, []byte("file-secret-4242\n"), 0o600))
	srv := redistest.Start(t)
	admin := adminAddr(t)
	p := start(t, map[string]string{"REDIS_URL": srv.URL(), "ADMIN_ADDR": admin, "EXEC_FILE_DIRS": dir,
		"EXEC_ENV_REFS": "ALLOWED_*", "ALLOWED_KEY": "env-secret-1717", "OPERATOR_SECRET": "op-secret-9999",
		"EXEC_ENV": "OPERATOR_SECRET", "REDACT_ENV": "OPERATOR_SECRET"})
	p.waitLog(t, "admin_listening")

	code, body := postRun(t, admin, `{"id": "refs-api", "nodes": [{"id": "a", "kind": "exec", "input": {"command": ["true"],
		"env": {"A": {"$file": "/etc/passwd"}, "B": {"$env": "API_TOKEN"}}}}]}`)
	assert.Equal(t, http.StatusBadRequest, code, body)
	assert.Contains(t, body, "nodes[0].input.env.A")
	assert.Contains(t, body, "EXEC_FILE_DIRS")
	assert.Contains(t, body, "nodes[0].input.env.B")
	assert.Contains(t, body, "EXEC_ENV_REFS")

	c := newClient(t, srv)
	start := time.Now()
	submit(t, c, `{"id": "refs-run", "nodes": [
		{"id": "fifo", "kind": "exec", "timeout": "1h", "input": {"command": ["true"], "env": {"K": {"$file": "`+fifo+`"}}}},
		{"id": "print", "kind": "exec", "input": {"command": ["sh", "-c", "echo \"$F $E $OPERATOR_SECRET\""],
			"env": {"F": {"$file": "`+secretFile+`"}, "E": {"$env": "ALLOWED_KEY"}}}},
		{"id": "fail", "kind": "exec", "max_attempts": 1, "input": {"command": ["sh", "-c", "echo \"$E\" >&2; exit 3"],
			"env": {"E": {"$env": "ALLOWED_KEY"}}}}]}`)
	info := waitRun(t, c, "refs-run")
	assert.Less(t, time.Since(start), 15*time.Second)
	byID := map[string]fence.NodeInfo{}
	for _, n := range info.Nodes {
		byID[n.ID] = n
	}
	assert.Equal(t, "FAILED", byID["fifo"].State)
	assert.Contains(t, byID["fifo"].Error, "not a regular file (a FIFO)")
	assert.Equal(t, "SUCCEEDED", byID["print"].State)
	assert.JSONEq(t, `"[redacted] [redacted] [redacted]"`, string(byID["print"].Result))
	assert.Equal(t, "FAILED", byID["fail"].State)
	assert.Contains(t, byID["fail"].Error, "exit code 3: [redacted]")

	events, err := c.Events(t.Context(), "refs-run", "", 1000)
	require.NoError(t, err)
	all, _ := json.Marshal(events)
	for _, s := range []string{"file-secret-4242", "env-secret-1717", "op-secret-9999"} {
		assert.NotContains(t, string(all), s)
		assert.NotContains(t, p.log(), s)
	}
}
