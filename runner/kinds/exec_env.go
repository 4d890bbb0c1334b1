package kinds

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// execSecretMax caps what a {"$file": ...} env value reads.
const execSecretMax = 64 << 10

// envValue is one value of an exec input's env: a literal string, or a
// reference that the worker resolves at the start of each attempt, so that
// a secret is never part of the run: {"$env": "NAME"} is the worker's own
// environment variable NAME, {"$file": "/path"} the content of a file on
// the worker (one trailing newline dropped, at most 64 KiB). The stored
// input, the events, the run view and the API hold the reference only.
type envValue struct {
	literal string
	env     string // set for {"$env": ...}
	file    string // set for {"$file": ...}
}

func (v *envValue) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &v.literal)
	}
	var ref map[string]string
	if err := json.Unmarshal(b, &ref); err != nil || len(ref) != 1 {
		return fmt.Errorf(`env value: want a string, {"$env": "NAME"} or {"$file": "/path"}`)
	}
	switch {
	case ref["$env"] != "":
		v.env = ref["$env"]
		if strings.ContainsAny(v.env, "=\x00") {
			return fmt.Errorf("env value: $env %q is not a variable name", v.env)
		}
	case ref["$file"] != "":
		v.file = ref["$file"]
	default:
		return fmt.Errorf(`env value: want a string, {"$env": "NAME"} or {"$file": "/path"}`)
	}
	return nil
}

// resolve returns the value the command gets for key. A reference that
// cannot be resolved on this worker is a retryable error: another worker
// may have the variable or the file. Errors name the reference, never a
// value.
func (v envValue) resolve(key string) (string, error) {
	switch {
	case v.env != "":
		s, ok := os.LookupEnv(v.env)
		if !ok {
			return "", fmt.Errorf("exec: input: env %q: $env %q is not set on this worker", key, v.env)
		}
		return s, nil
	case v.file != "":
		f, err := os.Open(v.file)
		if err != nil {
			return "", fmt.Errorf("exec: input: env %q: $file: %w", key, err)
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, execSecretMax+1))
		if err != nil {
			return "", fmt.Errorf("exec: input: env %q: $file %s: %w", key, v.file, err)
		}
		if len(b) > execSecretMax {
			return "", fmt.Errorf("exec: input: env %q: $file %s: over %d bytes", key, v.file, execSecretMax)
		}
		s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		if strings.ContainsRune(s, 0) {
			return "", fmt.Errorf("exec: input: env %q: $file %s: holds a NUL byte", key, v.file)
		}
		return s, nil
	}
	if strings.ContainsRune(v.literal, 0) {
		return "", permanentf("exec", "env", "%q holds a NUL byte", key)
	}
	return v.literal, nil
}
