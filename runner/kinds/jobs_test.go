package kinds_test

import (
	"context"
	"encoding/json"
	"errors"
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

	"github.com/batonrun/baton/egress"
	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/kinds"
	"github.com/batonrun/baton/spec"
)

// An exec child's environment is an allow-list: the worker's secrets are
// not in it, the variables the operator names are, and so are the node's
// env and the lease's BATON_* variables. BATON_REDIS_URL goes only to a
// command trusted with the store.
func TestExecEnvironmentIsAnAllowList(t *testing.T) {
	t.Setenv("API_TOKEN", "tok-secret-value")
	t.Setenv("REDIS_URL", "redis://:pw@10.0.0.5:6379/0")
	t.Setenv("BATON_TEST_PASSED", "yes")
	opts := kinds.ExecOptions{Env: []string{"BATON_TEST_*"}, RedisURL: "redis://127.0.0.1:1/0", StoreCommands: []string{"printenv"}}
	out, err := kinds.Exec(opts).Run(context.Background(), newTask("exec", `{"command": ["env"], "env": {"MINE": "1"}}`))
	require.NoError(t, err)
	var env string
	require.NoError(t, json.Unmarshal(out, &env))
	for _, want := range []string{"PATH=", "BATON_TEST_PASSED=yes", "MINE=1", "BATON_EPOCH=7"} {
		assert.Contains(t, env, want)
	}
	for _, never := range []string{"API_TOKEN", "REDIS_URL", "BATON_PREFIX", "BATON_NODE_KEY"} {
		assert.NotContains(t, env, never)
	}
	out, err = kinds.Exec(opts).Run(context.Background(), newTask("exec", `{"command": ["printenv", "BATON_REDIS_URL"]}`))
	require.NoError(t, err)
	assert.JSONEq(t, `"redis://127.0.0.1:1/0"`, string(out))
}

// A $file naming a FIFO, a device or a directory is refused at once, with
// a clear error, instead of holding the attempt; a link out of the allowed
// directories is refused too.
func TestExecFileRefusesWhatIsNotARegularFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	require.NoError(t, os.Symlink("/etc/hostname", filepath.Join(dir, "out")))
	require.NoError(t, os.Symlink("/dev/zero", filepath.Join(dir, "zero")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o700))
	k := kinds.Exec(kinds.ExecOptions{FileDirs: []string{dir}})
	for name, want := range map[string]string{"fifo": "not a regular file (a FIFO)", "zero": "not a regular file (a device)",
		"sub": "not a regular file (a directory)", "out": "a link leads outside EXEC_FILE_DIRS"} {
		in := execInput(t, "true", "", map[string]any{"env": map[string]any{"K": map[string]string{"$file": filepath.Join(dir, name)}}})
		res := runAsync(context.Background(), k, newTask("exec", in))
		select {
		case r := <-res:
			require.ErrorContains(t, r.err, want, name)
		case <-time.After(5 * time.Second):
			t.Fatalf("$file %s: the attempt hangs", name)
		}
	}
}

// $env and $file read only what the operator allows: anything else is a
// Permanent error naming the setting, and at submit a Checker refuses it
// naming the field.
func TestExecReferencesOutsideTheAllowListAreRefused(t *testing.T) {
	t.Setenv("BATON_TEST_OK", "fine-value")
	opts := kinds.ExecOptions{EnvRefs: []string{"BATON_TEST_OK"}, FileDirs: []string{t.TempDir()}}
	for _, c := range []struct{ ref, want string }{
		{`{"$env": "API_TOKEN"}`, "EXEC_ENV_REFS"},
		{`{"$file": "/etc/passwd"}`, "EXEC_FILE_DIRS"},
		{`{"$file": "relative/x"}`, "EXEC_FILE_DIRS"},
	} {
		in := `{"command": ["true"], "env": {"K": ` + c.ref + `}}`
		_, err := kinds.Exec(opts).Run(context.Background(), newTask("exec", in))
		require.ErrorContains(t, err, c.want, c.ref)
		assert.True(t, runner.IsPermanent(err), c.ref)

		run, err := spec.Parse([]byte(`{"nodes": [{"id": "a", "kind": "exec", "input": ` + in + `}]}`))
		require.NoError(t, err)
		err = run.Validate(spec.Limits{Policy: kinds.Checker{Stock: kinds.Stock{Exec: opts}}})
		require.ErrorContains(t, err, "nodes[0].input.env.K: ", c.ref)
		require.ErrorContains(t, err, c.want, c.ref)
	}
	run, err := spec.Parse([]byte(`{"nodes": [{"id": "a", "kind": "exec", "input": {"command": ["true"], "env": {"K": {"$env": "BATON_TEST_OK"}}}}]}`))
	require.NoError(t, err)
	require.NoError(t, run.Validate(spec.Limits{Policy: kinds.Checker{Stock: kinds.Stock{Exec: opts}}}))
}

// What a reference read, and the operator's named secrets, are redacted
// from the result and the error, whatever field or line they show in.
func TestExecRedactsReferencedValuesAndNamedSecrets(t *testing.T) {
	t.Setenv("BATON_TEST_KEY", `sk-"quoted"-value`)
	opts := kinds.ExecOptions{EnvRefs: []string{"BATON_TEST_KEY"}, Redact: kinds.NewRedactor("operator-secret-1")}
	env := map[string]any{"env": map[string]any{"K": map[string]string{"$env": "BATON_TEST_KEY"}}}
	out, err := kinds.Exec(opts).Run(context.Background(), newTask("exec",
		execInput(t, `printf '{"k": "%s", "raw": "'"$K"'", "o": "operator-secret-1"}' "$(printf %s "$K" | sed 's/"/\\"/g')"`, "", env)))
	require.NoError(t, err)
	assert.NotContains(t, string(out), "quoted")
	assert.NotContains(t, string(out), "operator-secret-1")
	assert.Contains(t, string(out), kinds.Redacted)

	_, err = kinds.Exec(opts).Run(context.Background(), newTask("exec", execInput(t, `echo "key is $K" >&2; exit 3`, "", env)))
	var xe *kinds.ExitError
	require.True(t, errors.As(err, &xe), "the error is still an ExitError: %v", err)
	assert.NotContains(t, err.Error(), "quoted")
	assert.Contains(t, err.Error(), "key is [redacted]")
}

// The http kind refuses loopback, link-local and private targets unless
// allowed: literally in the URL (a Permanent error naming "url", and at
// submit through a Checker), by a name that resolves there, and through a
// redirect from an allowed host. A redirect to another host is not
// followed unless the input says so.
func TestHTTPStaysOutOfThePrivateNetwork(t *testing.T) {
	t.Parallel()
	admin, reqs := serve(t, reply(200, `"paused"`))
	for _, url := range []string{admin.URL, strings.Replace(admin.URL, "127.0.0.1", "localhost", 1), "http://169.254.169.254/latest/meta-data"} {
		_, err := kinds.HTTP(nil).Run(context.Background(), newTask("http", httpInput(t, map[string]any{"url": url})))
		require.ErrorIs(t, err, egress.ErrRefused, url)
		assert.True(t, runner.IsPermanent(err), url)
	}
	run, err := spec.Parse([]byte(`{"nodes": [{"id": "a", "kind": "http", "input": {"url": "` + admin.URL + `"}}],
		"notify": {"url": "http://[::1]:9/"}}`))
	require.NoError(t, err)
	err = run.Validate(spec.Limits{Policy: kinds.Checker{}})
	require.ErrorContains(t, err, "nodes[0].input.url: egress: address refused")
	require.ErrorContains(t, err, "notify.url: egress: address refused")

	// An "outside" host the operator allows (127.0.0.2) redirects to the
	// admin on 127.0.0.1.
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 here: %v", err)
	}
	hop := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, admin.URL+"/monitor/api/queues/default:pause", http.StatusTemporaryRedirect)
	})}
	go func() { _ = hop.Serve(ln) }()
	t.Cleanup(func() { _ = hop.Close() })
	outside, err := egress.Parse("EGRESS_ALLOW", "127.0.0.2")
	require.NoError(t, err)
	k := kinds.HTTPWith(kinds.HTTPOptions{Egress: outside})
	via := "http://" + ln.Addr().String() + "/x"
	_, err = k.Run(context.Background(), newTask("http", httpInput(t, map[string]any{"url": via})))
	require.ErrorContains(t, err, "not followed")
	_, err = k.Run(context.Background(), newTask("http", httpInput(t, map[string]any{"url": via, "follow_redirects": true})))
	require.ErrorIs(t, err, egress.ErrRefused)
	assert.Empty(t, reqs, "the admin was reached")
}

// KINDS: a runner registers only the stock kinds named; a name that is not
// one is refused, naming the setting.
func TestRegisterStockOnlyTheKindsNamed(t *testing.T) {
	t.Parallel()
	names, err := kinds.ParseKinds("KINDS", "http, noop")
	require.NoError(t, err)
	r := registry{}
	kinds.RegisterStockOnly(r, kinds.Stock{}, names)
	assert.Len(t, r, 2)
	assert.NotContains(t, r, "exec")
	_, err = kinds.ParseKinds("KINDS", "exec,shell")
	require.ErrorContains(t, err, `KINDS: "shell": not a stock kind`)
}

// An http node whose input sets no timeout still ends: a server that never
// answers costs the default timeout, then a retryable error saying so.
func TestHTTPHasADefaultTimeout(t *testing.T) {
	defer kinds.SetHTTPDefaultTimeout(200 * time.Millisecond)()
	srv, _ := hangingServer(t)
	res := runAsync(context.Background(), localHTTP(), newTask("http", httpInput(t, map[string]any{"url": srv.URL})))
	select {
	case r := <-res:
		require.ErrorContains(t, r.err, "default timeout 200ms")
		assert.False(t, runner.IsPermanent(r.err))
	case <-time.After(10 * time.Second):
		t.Fatal("the request without a timeout never ended")
	}
}
