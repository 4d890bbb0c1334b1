package kinds

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/batonrun/baton/runner"
)

const (
	envResume     = "BATON_RESUME_FILE"
	envResumeWait = "BATON_RESUME_WAIT_ID"
	waitMark      = "::wait"
)

// waitLine parses "::wait {json}": the command asks to park its node with
// the JSON as the wait's request once it exits 0 (runner.Park). ok is false
// for any other line; err says what is wrong with a ::wait line that is
// not JSON.
func waitLine(line []byte) (req json.RawMessage, ok bool, err error) {
	rest, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte(waitMark))
	if !ok || (len(rest) > 0 && rest[0] != ' ' && rest[0] != '\t') {
		return nil, false, nil
	}
	rest = bytes.TrimSpace(rest)
	if len(rest) == 0 {
		rest = []byte("null")
	}
	if !json.Valid(rest) {
		return nil, true, fmt.Errorf("%s line is not JSON: %.80q", waitMark, rest)
	}
	return json.RawMessage(bytes.Clone(rest)), true, nil
}

// resumeEnv gives an attempt that follows a resume the answer in the file
// BATON_RESUME_FILE (the resume's value, JSON) and the id of the wait it
// answered in BATON_RESUME_WAIT_ID. Without a resume both are unset.
func resumeEnv(t *runner.Task, env []string) (_ []string, cleanup func(), _ error) {
	cleanup = func() {}
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, envResume+"=") && !strings.HasPrefix(kv, envResumeWait+"=") {
			out = append(out, kv)
		}
	}
	v, ok := t.ResumeValue()
	if !ok {
		return out, cleanup, nil
	}
	dir, err := os.MkdirTemp("", "baton-resume-")
	if err != nil {
		return nil, cleanup, fmt.Errorf("exec: resume file: %w", err)
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	path := filepath.Join(dir, "resume.json")
	if err := os.WriteFile(path, v, 0o600); err != nil {
		cleanup()
		return nil, func() {}, fmt.Errorf("exec: resume file: %w", err)
	}
	return append(out, envResume+"="+path, envResumeWait+"="+t.ResumedWait()), cleanup, nil
}
