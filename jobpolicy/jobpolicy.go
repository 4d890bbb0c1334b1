// Package jobpolicy is what a runner lets its jobs reach, written once for
// both ends of a run. The stock kinds enforce it when a node runs
// (runner/kinds), and every way a run gets in (the runner's HTTP API,
// enqueue submit, the Go client, a schedule's put and each of its ticks)
// refuses at once, naming the field, what the live runners would refuse.
//
// A submit does not share a runner's environment: enqueue on an
// operator's laptop has no EXEC_FILE_DIRS, and reading its own would
// refuse what the fleet allows or allow what it refuses. So each runner
// publishes its Rules in its advertisement in Redis (fence.WorkerInfo.Jobs),
// the fleet's shared view, and a submit checks a node against the rules
// of the live runners that could claim it (Check). The check at submit is
// a courtesy that saves a failed run; the runner's check when the node
// runs is the boundary.
package jobpolicy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/batonrun/baton/egress"
	"github.com/batonrun/baton/spec"
)

// StockKinds are the stock kinds' names, as run specs use them.
var StockKinds = []string{"exec", "http", "sleep", "noop"}

// Rules is one runner's policy for its jobs, as its settings say and as it
// publishes it: the stock kinds it runs (KINDS), what http nodes and
// webhooks may reach beyond the public internet (EGRESS_ALLOW), the
// variables and the directories an exec node's env may reference
// (EXEC_ENV_REFS, EXEC_FILE_DIRS). The zero value is a runner's defaults
// but for Kinds: every stock kind off, public addresses only, no
// reference allowed.
type Rules struct {
	// Kinds are the stock kinds the runner runs; a stock kind not listed
	// is switched off there.
	Kinds []string `json:"kinds"`
	// Egress is the allow-list of private addresses and host names; nil:
	// none.
	Egress *egress.Policy `json:"egress_allow,omitempty"`
	// EnvRefs are the variables {"$env": ...} may read: NAME, or PREFIX_*.
	EnvRefs []string `json:"env_refs,omitempty"`
	// FileDirs are the absolute directories {"$file": ...} may read under.
	FileDirs []string `json:"file_dirs,omitempty"`
}

var _ spec.Policy = (*Rules)(nil)

// EnvNamed reports whether names holds name, or a prefix of it ending in
// "*" (PREFIX_*).
func EnvNamed(names []string, name string) bool {
	for _, n := range names {
		if n == name || (strings.HasSuffix(n, "*") && strings.HasPrefix(name, n[:len(n)-1])) {
			return true
		}
	}
	return false
}

// Under reports whether the clean absolute path lies in one of dirs.
func Under(path string, dirs []string) bool {
	for _, d := range dirs {
		if path == d || strings.HasPrefix(path, strings.TrimSuffix(d, "/")+"/") {
			return true
		}
	}
	return false
}

// Dirs returns the absolute directories of dirs, cleaned; others are
// dropped (the runner refuses them at start).
func Dirs(dirs []string) []string {
	var out []string
	for _, d := range dirs {
		if filepath.IsAbs(d) {
			out = append(out, filepath.Clean(d))
		}
	}
	return out
}

// FileAllowed reports whether path, cleaned, lies under an allowed
// directory. It reads nothing: where links lead is checked at the open.
func (r *Rules) FileAllowed(path string) bool {
	return filepath.IsAbs(path) && Under(filepath.Clean(path), Dirs(r.FileDirs))
}

// EnvRef is one value of an exec input's env: a literal string, or a
// reference the runner resolves at the start of each attempt:
// {"$env": "NAME"} or {"$file": "/path"}.
type EnvRef struct {
	Literal string
	Env     string // set for {"$env": ...}
	File    string // set for {"$file": ...}
}

// UnmarshalJSON reads a string or a reference.
func (v *EnvRef) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &v.Literal)
	}
	var ref map[string]string
	if err := json.Unmarshal(b, &ref); err != nil || len(ref) != 1 {
		return fmt.Errorf(`env value: want a string, {"$env": "NAME"} or {"$file": "/path"}`)
	}
	switch {
	case ref["$env"] != "":
		v.Env = ref["$env"]
		if strings.ContainsAny(v.Env, "=\x00") {
			return fmt.Errorf("env value: $env %q is not a variable name", v.Env)
		}
	case ref["$file"] != "":
		v.File = ref["$file"]
	default:
		return fmt.Errorf(`env value: want a string, {"$env": "NAME"} or {"$file": "/path"}`)
	}
	return nil
}

// CheckRef returns why r does not let the reference read what it names,
// "" when it may. The message names the setting, never a value.
func (r *Rules) CheckRef(v EnvRef) string {
	switch {
	case v.Env != "" && !EnvNamed(r.EnvRefs, v.Env):
		return fmt.Sprintf("$env %q is not one the runner lets jobs read (EXEC_ENV_REFS)", v.Env)
	case v.File != "" && !r.FileAllowed(v.File):
		return fmt.Sprintf("$file %q is not under a directory the runner lets jobs read (EXEC_FILE_DIRS)", v.File)
	}
	return ""
}

// CheckURL refuses a URL whose host is literally an address r refuses (or
// localhost). A host name that resolves to one is known only at the dial,
// and refused there.
func (r *Rules) CheckURL(raw string) error { return r.Egress.CheckURL(raw) }

// CheckInput checks an http node's url and an exec node's env references,
// each problem naming its field within the input ("url", "env.API_KEY").
// An input it cannot read is left to the kind, which names what is wrong.
func (r *Rules) CheckInput(kind string, input json.RawMessage) []*spec.Error {
	switch kind {
	case "http":
		var in struct {
			URL string `json:"url"`
		}
		if json.Unmarshal(input, &in) != nil || in.URL == "" {
			return nil
		}
		if err := r.CheckURL(in.URL); err != nil {
			return []*spec.Error{{Field: "url", Msg: err.Error()}}
		}
	case "exec":
		var in struct {
			Env map[string]json.RawMessage `json:"env"`
		}
		if json.Unmarshal(input, &in) != nil {
			return nil
		}
		var out []*spec.Error
		for _, k := range slices.Sorted(maps.Keys(in.Env)) {
			var v EnvRef
			if b := bytes.TrimSpace(in.Env[k]); len(b) == 0 || b[0] != '{' || v.UnmarshalJSON(b) != nil {
				continue
			}
			if msg := r.CheckRef(v); msg != "" {
				out = append(out, &spec.Error{Field: "env." + k, Msg: msg})
			}
		}
		return out
	}
	return nil
}
