package kinds_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/kinds"
)

// An env value may name the worker's variable or a file on the worker; the
// command gets the value, resolved at the attempt's start.
func TestExecEnvReferencesAreResolvedOnTheWorker(t *testing.T) {
	t.Setenv("BATON_TEST_SECRET", "from-env")
	secret := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(secret, []byte("from-file\n"), 0o600))
	in := execInput(t, `[ "$A" = from-env ] && [ "$B" = from-file ] && echo "ok|$C"`, "", map[string]any{"env": map[string]any{
		"A": map[string]string{"$env": "BATON_TEST_SECRET"},
		"B": map[string]string{"$file": secret},
		"C": "literal",
	}})
	opts := kinds.ExecOptions{EnvRefs: []string{"BATON_TEST_*"}, FileDirs: []string{filepath.Dir(secret)}}
	out, err := kinds.Exec(opts).Run(context.Background(), newTask("exec", in))
	require.NoError(t, err)
	var got string
	require.NoError(t, json.Unmarshal(out, &got))
	require.Equal(t, "ok|literal", got)
}

// A reference this worker cannot resolve is a retryable error that names
// the reference (another worker may have it); a malformed one is
// permanent. Neither error holds a value.
func TestExecEnvReferenceErrors(t *testing.T) {
	t.Setenv("BATON_TEST_SET", "do-not-show")
	for _, c := range []struct {
		name      string
		env       any
		want      string
		permanent bool
	}{
		{"unset variable", map[string]string{"$env": "BATON_TEST_UNSET_VAR"}, `$env "BATON_TEST_UNSET_VAR" is not set on this worker`, false},
		{"missing file", map[string]string{"$file": "/nonexistent/secret"}, "no such file", false},
		{"both", map[string]string{"$env": "BATON_TEST_SET", "$file": "/x"}, `want a string, {"$env": "NAME"} or {"$file": "/path"}`, true},
		{"unknown", map[string]string{"$secret": "x"}, `want a string`, true},
		{"number", 3, `want a string`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := execInput(t, "true", "", map[string]any{"env": map[string]any{"K": c.env}})
			opts := kinds.ExecOptions{EnvRefs: []string{"BATON_TEST_*"}, FileDirs: []string{"/nonexistent"}}
			_, err := kinds.Exec(opts).Run(context.Background(), newTask("exec", in))
			require.ErrorContains(t, err, c.want)
			require.Equal(t, c.permanent, runner.IsPermanent(err), "%v", err)
			require.NotContains(t, err.Error(), "do-not-show")
		})
	}
}
