package spec

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// This file turns a parsed spec document, JSON or YAML, into a Run by
// hand rather than through encoding/json's reflection: every problem is
// collected instead of the first, each names its field path and position,
// and no message can mention a Go type.

// maxProblems is how many problems an error lists; the rest are counted.
const maxProblems = 20

// problems collects a spec's problems: identical ones once, at most
// maxProblems of them listed, in the order of the lines they are on.
type problems struct {
	list    []problem
	seen    map[string]bool
	dropped int
}

type problem struct {
	err       *Error
	line, col int // 0: no position
}

func (p *problems) add(field, msg string) { p.addAt(0, 0, field, msg) }

// addAt adds a problem at a line and column of the document.
func (p *problems) addAt(line, col int, field, msg string) {
	if line > 0 {
		msg += posText(line, col)
	}
	key := field + "\x00" + msg
	if p.seen[key] {
		return
	}
	if len(p.list) >= maxProblems {
		if len(p.seen) < 100*maxProblems { // past that, count without deduping
			p.seen[key] = true
		}
		p.dropped++
		return
	}
	if p.seen == nil {
		p.seen = map[string]bool{}
	}
	p.seen[key] = true
	p.list = append(p.list, problem{&Error{Field: field, Msg: msg}, line, col})
}

func (p *problems) addf(field, format string, a ...any) { p.add(field, fmt.Sprintf(format, a...)) }

func (p *problems) empty() bool { return len(p.list) == 0 }

// err joins the problems, with a last one saying how many were left out.
func (p *problems) err() error {
	slices.SortStableFunc(p.list, func(a, b problem) int {
		switch { // problems without a position go last, in their order
		case a.line == 0 && b.line == 0:
			return 0
		case a.line == 0:
			return 1
		case b.line == 0:
			return -1
		}
		return cmp.Or(cmp.Compare(a.line, b.line), cmp.Compare(a.col, b.col))
	})
	errs := make([]error, 0, len(p.list)+1)
	for _, e := range p.list {
		errs = append(errs, e.err)
	}
	if p.dropped > 0 {
		errs = append(errs, &Error{Field: "spec", Msg: fmt.Sprintf("and %d more problems", p.dropped)})
	}
	return errors.Join(errs...)
}

// clip cuts a number as written in the spec to 32 bytes for a message.
func clip(s string) string {
	if len(s) <= 32 {
		return s
	}
	return s[:32] + "..."
}

// quote quotes a string from the spec for a message, cut to 64 bytes, so
// that messages stay small whatever the spec holds.
func quote(s string) string {
	const maxLen = 64
	if len(s) <= maxLen {
		return strconv.Quote(s)
	}
	cut := maxLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + fmt.Sprintf("... (%d bytes)", len(s))
}

// vkind is the kind of a value in a spec document.
type vkind uint8

const (
	vNull vkind = iota
	vBool
	vNumber
	vString
	vList
	vObject
	vOther // a YAML scalar of another tag: !!binary, a custom tag
)

// value is one value of a spec document with where it starts. A node's
// input is kept opaque: its JSON text, or its YAML node.
type value struct {
	kind      vkind
	text      string // a string's value; any other scalar as written
	num       string // vNumber: the number as strconv reads it (YAML writes 0x10, .inf)
	tag       string // vOther: the YAML tag
	list      []*value
	members   []member
	line, col int

	opaque bool
	raw    json.RawMessage // opaque JSON
	yaml   *yaml.Node      // opaque YAML
}

// member is one key of an object.
type member struct {
	key       string
	line, col int
	val       *value
	bad       string // set: the key itself is wrong (a YAML key that is no scalar)
}

// role is where a value sits in the spec's shape; parsers keep a node's
// input opaque by it.
type role uint8

const (
	roleOther role = iota
	roleRoot
	roleNodes
	roleNode
	roleOpaque
)

func (r role) member(key string) role {
	switch {
	case r == roleRoot && key == "nodes":
		return roleNodes
	case r == roleNode && key == "input":
		return roleOpaque
	}
	return roleOther
}

func (r role) elem() role {
	if r == roleNodes {
		return roleNode
	}
	return roleOther
}

func (v *value) describe() string {
	switch v.kind {
	case vNull:
		return "null"
	case vBool:
		return "a boolean"
	case vNumber:
		return "a number"
	case vString:
		return "a string"
	case vList:
		return "a list"
	case vObject:
		return "an object"
	}
	return "a value tagged " + quote(v.tag)
}

// maxExpanded bounds the values a spec expands to. Only YAML aliases can
// make it larger than the document, and a few lines of aliases can
// otherwise expand to billions.
const maxExpanded = 1 << 21

// specDecoder fills a Run from a document, collecting every problem.
type specDecoder struct {
	p        problems
	expanded int
}

// step counts one more value; false once the spec is too large.
func (d *specDecoder) step() bool {
	d.expanded++
	if d.expanded == maxExpanded {
		d.p.addf("spec", "more than %d values once YAML aliases are expanded", maxExpanded)
	}
	return d.expanded < maxExpanded
}

var (
	runFields   = []string{"id", "thread", "multitask", "nodes", "start_at", "start_in", "timeout", "notify"}
	nodeFields  = []string{"id", "kind", "deps", "input", "max_attempts", "timeout", "queue", "retry", "limits"}
	retryFields = []string{"backoff", "base", "max", "jitter"}
)

func (d *specDecoder) spec(root *value) *Run {
	s := &Run{}
	if root.kind != vObject {
		d.p.addAt(root.line, root.col, "spec", `want an object with "nodes", got `+root.describe())
		return s
	}
	f := d.fields(root, "", runFields)
	s.ID = d.str("id", f["id"])
	s.Thread = d.str("thread", f["thread"])
	s.Multitask = d.str("multitask", f["multitask"])
	if v := f["start_at"]; v != nil && v.kind != vNull {
		if at := d.str("start_at", v); at != "" {
			t, err := time.Parse(time.RFC3339Nano, at)
			if err != nil {
				d.p.addAt(v.line, v.col, "start_at", quote(at)+`: want an RFC 3339 time such as "2025-06-01T12:00:00Z"`)
			} else {
				s.StartAt = &t
			}
		}
	}
	s.StartIn = d.timeout("start_in", f["start_in"])
	s.Timeout = d.timeout("timeout", f["timeout"])
	s.Notify = d.notify("notify", f["notify"]) // notify.go
	if v := f["nodes"]; v != nil {
		switch v.kind {
		case vNull:
		case vList:
			for i, e := range v.list {
				if !d.step() {
					break
				}
				s.Nodes = append(s.Nodes, d.node(fmt.Sprintf("nodes[%d]", i), e))
			}
		default:
			d.wrongType("nodes", v, "a list")
		}
	}
	return s
}

func (d *specDecoder) node(path string, v *value) Node {
	var n Node
	if v.kind != vObject {
		d.wrongType(path, v, "an object")
		return n
	}
	f := d.fields(v, path, nodeFields)
	n.ID = d.str(path+".id", f["id"])
	n.Kind = d.str(path+".kind", f["kind"])
	n.Queue = d.str(path+".queue", f["queue"])
	if dv := f["deps"]; dv != nil {
		switch dv.kind {
		case vNull:
		case vList:
			for i, e := range dv.list {
				if !d.step() {
					break
				}
				field := fmt.Sprintf("%s.deps[%d]", path, i)
				if e.kind != vString {
					d.wrongType(field, e, "a string")
				}
				n.Deps = append(n.Deps, e.text)
			}
		default:
			d.wrongType(path+".deps", dv, "a list of node ids")
		}
	}
	n.Input = d.input(path+".input", f["input"])
	n.MaxAttempts = d.attempts(path+".max_attempts", f["max_attempts"])
	n.Timeout = d.timeout(path+".timeout", f["timeout"])
	n.Retry = d.retry(path+".retry", f["retry"])
	n.Limits = d.limits(path+".limits", f["limits"]) // limits.go
	return n
}

// retry reads a node's retry policy: an object of optional fields.
func (d *specDecoder) retry(path string, v *value) *RetryPolicy {
	if v == nil || v.kind == vNull {
		return nil
	}
	if v.kind != vObject {
		d.wrongType(path, v, `an object such as {"backoff": "fixed", "base": "1s"}`)
		return nil
	}
	f := d.fields(v, path, retryFields)
	r := &RetryPolicy{Backoff: d.str(path+".backoff", f["backoff"]),
		Base: d.timeout(path+".base", f["base"]), Max: d.timeout(path+".max", f["max"])}
	if j := f["jitter"]; j != nil && j.kind != vNull {
		if j.kind != vBool {
			d.wrongType(path+".jitter", j, "true or false")
		} else {
			b := strings.EqualFold(j.text, "true")
			r.Jitter = &b
		}
	}
	return r
}

// fields checks an object's keys against known ones (exactly: "ID" is not
// "id") and returns the values of those present. Key problems are about
// the document's text, so they are filed under "spec", naming the key's
// path and position.
func (d *specDecoder) fields(v *value, path string, known []string) map[string]*value {
	out := make(map[string]*value, len(known))
	first := make(map[string]*member, len(v.members))
	for i := range v.members {
		m := &v.members[i]
		if !d.step() {
			break
		}
		kp := keyPath(path, m.key)
		if m.bad != "" {
			d.p.addAt(m.line, m.col, "spec", kp+": "+m.bad)
			continue
		}
		if f, dup := first[m.key]; dup {
			d.p.addAt(m.line, m.col, "spec", fmt.Sprintf("%s: duplicate key (first at line %d, column %d)", kp, f.line, f.col))
			continue
		}
		first[m.key] = m
		if isKnown(known, m.key) {
			out[m.key] = m.val
			continue
		}
		d.p.addAt(m.line, m.col, "spec", kp+": unknown field; "+suggest(m.key, known))
	}
	return out
}

func isKnown(known []string, key string) bool {
	for _, k := range known {
		if k == key {
			return true
		}
	}
	return false
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// keyPath appends a key to a field path: nodes[0].kind, or nodes[0]["a b"]
// for a key that would not read as one.
func keyPath(path, key string) string {
	if !plainKey.MatchString(key) {
		return path + "[" + quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// suggest names the known field an unknown key was likely meant to be.
func suggest(key string, known []string) string {
	for _, k := range known {
		if strings.EqualFold(k, key) {
			return fmt.Sprintf("field names are case-sensitive: did you mean %q?", k)
		}
	}
	if len(key) <= 64 {
		best, bestD := "", 3
		for _, k := range known {
			if dist := editDistance(key, k); dist < bestD {
				best, bestD = k, dist
			}
		}
		if best != "" {
			return fmt.Sprintf("did you mean %q?", best)
		}
	}
	return "known: " + strings.Join(known, ", ")
}

// editDistance is the Levenshtein distance of two short strings.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func (d *specDecoder) wrongType(field string, v *value, want string) {
	msg := "want " + want + ", got " + v.describe()
	if want == "a string" && (v.kind == vNumber || v.kind == vBool) {
		msg += "; quote it: " + quote(v.text)
	}
	d.p.addAt(v.line, v.col, field, msg)
}

// str reads an optional string; null is the same as absent.
func (d *specDecoder) str(field string, v *value) string {
	if v == nil || v.kind == vNull {
		return ""
	}
	if v.kind != vString {
		d.wrongType(field, v, "a string")
		return ""
	}
	return v.text
}

func (d *specDecoder) input(field string, v *value) json.RawMessage {
	switch {
	case v == nil:
		return nil
	case v.raw != nil:
		return v.raw
	case v.yaml != nil:
		raw, msg, line := yamlToJSON(v.yaml)
		switch {
		case msg == "":
		case line > 0: // the library's line is the closer one
			d.p.addAt(line, 0, field, msg)
		default:
			d.p.addAt(v.line, v.col, field, msg)
		}
		return raw
	}
	d.p.addAt(v.line, v.col, field, "want any JSON value") // not reached: parsers keep inputs opaque
	return nil
}

// attempts reads max_attempts: a whole number. Validate checks its range;
// here only what does not fit an int is refused.
func (d *specDecoder) attempts(field string, v *value) int {
	if v == nil || v.kind == vNull {
		return 0
	}
	if v.kind != vNumber {
		d.wrongType(field, v, "a number")
		return 0
	}
	if n, err := strconv.ParseInt(v.num, 10, 32); err == nil {
		return int(n)
	}
	f, err := strconv.ParseFloat(v.num, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange), math.IsNaN(f):
		d.p.addAt(v.line, v.col, field, quote(v.text)+" is not a number")
	case f != math.Trunc(f):
		d.p.addAt(v.line, v.col, field, clip(v.text)+": want a whole number")
	case f > math.MaxInt32:
		d.p.addAt(v.line, v.col, field, clip(v.text)+" is too large, want 1 to 1000 (0: default)")
	case f < math.MinInt32:
		d.p.addAt(v.line, v.col, field, clip(v.text)+" is too small, want 1 to 1000 (0: default)")
	default:
		return int(f)
	}
	return 0
}

func (d *specDecoder) timeout(field string, v *value) Duration {
	if v == nil || v.kind == vNull {
		return 0
	}
	var (
		t   Duration
		msg string
	)
	switch v.kind {
	case vString:
		t, msg = durationOf(v.text)
	case vNumber:
		t, msg = secondsOf(v.num, v.text)
	default:
		d.wrongType(field, v, `a duration such as "90s" or a number of seconds`)
		return 0
	}
	if msg != "" {
		d.p.addAt(v.line, v.col, field, msg)
	}
	return t
}

// durationSyntax is what time.ParseDuration reads; a string that matches
// it and is still refused is too large.
var durationSyntax = regexp.MustCompile(`^[-+]?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`)

const durationRange = "at most about 292 years"

// durationOf reads a timeout written as a Go duration; msg is set when it
// is not one.
func durationOf(s string) (Duration, string) {
	t, err := time.ParseDuration(s)
	switch {
	case err != nil && durationSyntax.MatchString(s):
		if strings.HasPrefix(s, "-") {
			return 0, quote(s) + " is negative"
		}
		return 0, quote(s) + " is too large (" + durationRange + ")"
	case err != nil:
		return 0, quote(s) + `: want a duration such as "90s" or "5m", or a number of seconds`
	case t < 0:
		return 0, quote(s) + " is negative"
	}
	return Duration(t), ""
}

// secondsOf reads a timeout written as a number of seconds: num as
// strconv reads it, lit as written.
func secondsOf(num, lit string) (Duration, string) {
	f, err := strconv.ParseFloat(num, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange), math.IsNaN(f):
		return 0, quote(lit) + " is not a number"
	case f < 0:
		return 0, clip(lit) + " seconds is negative"
	case f*float64(time.Second) >= math.MaxInt64: // MaxInt64 rounds up to 2^63 as a float64
		return 0, clip(lit) + " seconds is too large (" + durationRange + ")"
	}
	return Duration(f * float64(time.Second)), ""
}
