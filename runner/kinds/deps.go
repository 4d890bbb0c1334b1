package kinds

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/batonrun/baton/runner"
)

// envDeps names the file that holds the node's dependencies' results.
const envDeps = "BATON_DEPS_FILE"

// depsObject is the dependencies' results as one JSON object, {} for none.
func depsObject(t *runner.Task) (json.RawMessage, error) {
	if len(t.Deps) == 0 {
		return json.RawMessage("{}"), nil
	}
	b, err := json.Marshal(t.Deps) // keys sorted; results verbatim
	if err != nil {
		return nil, fmt.Errorf("dependency results: %w", err)
	}
	return b, nil
}

// depsEnv writes the dependencies' results to a file of their own and
// names it in BATON_DEPS_FILE (an input env of that name is replaced);
// cleanup removes it after the attempt.
func depsEnv(t *runner.Task, env []string) (_ []string, cleanup func(), _ error) {
	cleanup = func() {}
	obj, err := depsObject(t)
	if err != nil {
		return nil, cleanup, runner.Permanent(fmt.Errorf("exec: %w", err))
	}
	dir, err := os.MkdirTemp("", "baton-deps-")
	if err != nil {
		return nil, cleanup, fmt.Errorf("exec: deps file: %w", err)
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	path := filepath.Join(dir, "deps.json")
	if err := os.WriteFile(path, obj, 0o600); err != nil {
		cleanup()
		return nil, func() {}, fmt.Errorf("exec: deps file: %w", err)
	}
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, envDeps+"=") {
			out = append(out, kv)
		}
	}
	return append(out, envDeps+"="+path), cleanup, nil
}
