package check

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Step is the data every checkpoint of the conversation workload holds,
// whether a Go node (internal/chaos/agent) or an exec command saved it: who
// wrote it and what its attempt resumed from. The thread checks read it
// back to tell which checkpoint an attempt started on.
type Step struct {
	// Tag names this checkpoint: "run|node|epoch|seq", seq counting the
	// attempt's saves from 1.
	Tag string `json:"tag"`
	// Token is the writer's fencing token (fence.Token's text): the claim
	// id it saved under.
	Token string `json:"token"`
	// From is the Tag of the checkpoint this one follows: for seq 1, the
	// newest one the attempt read when it started ("" when there was none);
	// after that, the attempt's own previous save.
	From string `json:"from"`
	// FromV is the version of From when the writer knew it (Go nodes read
	// it with the checkpoint); 0: unknown (exec commands see only data).
	FromV int64 `json:"from_v,omitempty"`
	// I counts the thread's steps in the namespace, carried across runs.
	I int64 `json:"i"`
}

// ParseStep reads a checkpoint's data; ok is false for data that is not a
// Step (a checkpoint from another writer).
func ParseStep(data []byte) (Step, bool) {
	var s Step
	if err := json.Unmarshal(data, &s); err != nil || s.Tag == "" {
		return Step{}, false
	}
	return s, true
}

// TagRef is a parsed Tag.
type TagRef struct {
	Run, Node string
	Epoch     int64
	Seq       int64
}

// MakeTag builds a Tag.
func MakeTag(run, node string, epoch, seq int64) string {
	return fmt.Sprintf("%s|%s|%d|%d", run, node, epoch, seq)
}

// ParseTag parses a Tag.
func ParseTag(tag string) (TagRef, error) {
	p := strings.Split(tag, "|")
	if len(p) != 4 {
		return TagRef{}, fmt.Errorf("tag %q: want run|node|epoch|seq", tag)
	}
	e, err1 := strconv.ParseInt(p[2], 10, 64)
	s, err2 := strconv.ParseInt(p[3], 10, 64)
	if err1 != nil || err2 != nil {
		return TagRef{}, fmt.Errorf("tag %q: epoch and seq must be numbers", tag)
	}
	return TagRef{Run: p[0], Node: p[1], Epoch: e, Seq: s}, nil
}

// claimOfToken returns the claim id in a fence.Token's text
// ("run/node@epoch/claim"), or "".
func claimOfToken(tok string) string {
	_, rest, ok := strings.Cut(tok, "@")
	if !ok {
		return ""
	}
	_, claim, _ := strings.Cut(rest, "/")
	return claim
}
