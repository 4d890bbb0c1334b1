package kinds_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/runner/kinds"
)

var twoDeps = map[string]json.RawMessage{"fetch": json.RawMessage(`{"n":1}`), "lint": json.RawMessage(`"ok"`)}

// exec: BATON_DEPS_FILE holds the dependencies' results ({} without any),
// cannot be overridden by input env, and is gone after the attempt.
func TestExecDepsFile(t *testing.T) {
	t.Parallel()
	script := `printf '{"path":"%s","deps":%s}' "$BATON_DEPS_FILE" "$(cat "$BATON_DEPS_FILE")"`
	for name, deps := range map[string]map[string]json.RawMessage{"with deps": twoDeps, "without": nil} {
		task := newTask("exec", execInput(t, script, "", map[string]any{"env": map[string]string{"BATON_DEPS_FILE": "/etc/passwd"}}))
		task.Deps = deps
		out, err := kinds.Exec(kinds.ExecOptions{}).Run(context.Background(), task)
		require.NoError(t, err, name)
		var got struct {
			Path string
			Deps map[string]json.RawMessage
		}
		require.NoError(t, json.Unmarshal(out, &got), string(out))
		assert.NotEqual(t, "/etc/passwd", got.Path, name)
		if deps == nil {
			assert.Empty(t, got.Deps, name)
		} else {
			assert.Equal(t, deps, got.Deps, name)
		}
		_, err = os.Stat(got.Path)
		assert.True(t, os.IsNotExist(err), "%s: the deps file is removed after the attempt", name)
	}
}

// http: a node with deps POSTs the envelope, or the bare body when asked;
// a node without deps POSTs the bare body.
func TestHTTPDepsEnvelope(t *testing.T) {
	t.Parallel()
	srv, reqs := serve(t, reply(200, `{}`))
	for _, c := range []struct {
		name string
		deps map[string]json.RawMessage
		bare bool
		want string
	}{
		{"envelope", twoDeps, false, `{"input":{"q":1},"deps":{"fetch":{"n":1},"lint":"ok"}}`},
		{"bare on request", twoDeps, true, `{"q":1}`},
		{"no deps", nil, false, `{"q":1}`},
	} {
		task := newTask("http", httpInput(t, map[string]any{"url": srv.URL, "body": map[string]any{"q": 1}, "bare": c.bare}))
		task.Deps = c.deps
		_, err := localHTTP().Run(context.Background(), task)
		require.NoError(t, err, c.name)
		assert.JSONEq(t, c.want, (<-reqs).body, c.name)
	}
}
