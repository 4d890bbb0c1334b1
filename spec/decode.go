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
// otherwise expand to billions: a document of n bytes may expand to
// 16n + 65536 values (a node list sharing one anchor of defaults is far
// below that), and none to more than maxExpanded.
const maxExpanded = 1 << 21

// expansionLimit is maxExpanded for a document of n bytes.
func expansionLimit(n int) int { return min(maxExpanded, 16*n+1<<16) }

// specDecoder reads a parsed document into a Run in three steps: the
// checks of the text no schema can see (duplicate and malformed keys,
// values JSON has no form for, the size once YAML aliases are expanded),
// then the run spec's JSON Schema (schema.go), which decides everything
// else a document can get wrong, then encoding/json, which cannot fail on
// what the schema accepted.
type specDecoder struct {
	p        problems
	expanded int
	limit    int // expansionLimit of the document
	// reported holds the field paths the text checks filed a problem
	// under; the schema's problems there say the same again.
	reported map[string]bool
}

// step counts one more value; false once the spec is too large.
func (d *specDecoder) step() bool {
	d.expanded++
	if d.expanded == d.limit {
		d.p.addf("spec", "more than %d values once YAML aliases are expanded", d.limit)
	}
	return d.expanded < d.limit
}

func (d *specDecoder) addAt(v *value, field, msg string) {
	if d.reported == nil {
		d.reported = map[string]bool{}
	}
	d.reported[field] = true
	d.p.addAt(v.line, v.col, field, msg)
}

// run decodes a document: nil and the problems in d.p when it is not a
// run spec.
func (d *specDecoder) run(root *value) *Run {
	inst := d.instance(root, "")
	failed := validate(root, inst, d) // schema.go
	if !d.p.empty() {
		d.alsoGoChecks(root, inst, failed)
		return nil
	}
	s, err := decodeRun(root, inst)
	if err != nil { // not reached: the schema accepted it
		d.p.add("spec", "the schema accepts what the decoder refuses; please report it: "+quote(err.Error()))
		return nil
	}
	return s
}

// decodeRun fills a Run from a document's instance with encoding/json.
func decodeRun(root *value, inst any) (*Run, error) {
	b, err := json.Marshal(inst)
	s := &Run{}
	if err == nil {
		err = json.Unmarshal(b, s)
	}
	if err != nil {
		return nil, err
	}
	// Inputs are kept as written (JSON) or as converted (YAML), not
	// re-encoded: instance left them out.
	if nodes := root.member("nodes"); nodes != nil {
		for i, n := range nodes.list {
			if in := n.member("input"); in != nil && i < len(s.Nodes) {
				s.Nodes[i].Input = in.raw
			}
		}
	}
	return s, nil
}

// alsoGoChecks adds, to a document the schema refused, the problems of
// the checks only Go makes (dependency references, duplicate node ids),
// so that a spec's problems are all listed at once: it decodes what is
// left once every value that cannot be decoded (at the instance locations
// in failed) is taken out, and files Validate's problems at fields no
// other problem names or holds.
func (d *specDecoder) alsoGoChecks(root *value, inst any, failed [][]string) {
	top, ok := inst.(map[string]any)
	if !ok {
		return
	}
	for _, loc := range failed {
		drop(top, loc)
	}
	s, err := decodeRun(root, top)
	if err != nil {
		return
	}
	named := func(field string) bool {
		for _, p := range d.p.list {
			f := p.err.Field
			if field == f || strings.HasPrefix(field, f+".") || strings.HasPrefix(field, f+"[") {
				return true
			}
		}
		return false
	}
	const huge = math.MaxInt32 // the caller's limits are applied later
	var goP problems
	s.check(Limits{MaxInputBytes: huge, MaxNodes: huge, MaxSpecBytes: huge}, &goP)
	for _, p := range goP.list {
		if !named(p.err.Field) {
			d.p.add(p.err.Field, p.err.Msg)
		}
	}
	d.p.dropped += goP.dropped
}

// drop takes the value at loc out of an instance: a member is deleted, a
// list's element becomes null.
func drop(v any, loc []string) {
	for i, seg := range loc {
		last := i == len(loc)-1
		switch x := v.(type) {
		case map[string]any:
			if last {
				delete(x, seg)
				return
			}
			v = x[seg]
		case []any:
			j, err := strconv.Atoi(seg)
			if err != nil || j < 0 || j >= len(x) {
				return
			}
			if last {
				x[j] = nil
				return
			}
			v = x[j]
		default:
			return
		}
	}
}

// member is an object's value for key, nil if there is none.
func (v *value) member(key string) *value {
	for i := range v.members {
		if m := &v.members[i]; m.key == key && m.bad == "" {
			return m.val
		}
	}
	return nil
}

// instance is the document as JSON's data model, as the schema reads it:
// objects as maps, numbers as json.Number in a form encoding/json reads
// into an int when they are whole. A node's input stands as null (the
// schema allows any value there); it is checked to have a JSON form and
// kept in v.raw. The text checks file their problems here.
func (d *specDecoder) instance(v *value, path string) any {
	if !d.step() {
		return nil
	}
	if v.opaque {
		d.input(path, v)
		return nil
	}
	switch v.kind {
	case vBool:
		return strings.EqualFold(v.text, "true")
	case vNumber:
		n, msg := jsonNumber(v)
		if msg != "" {
			d.addAt(v, fieldName(path), msg)
			return nil
		}
		return n
	case vString:
		return v.text
	case vList:
		out := make([]any, 0, len(v.list))
		for i, e := range v.list {
			out = append(out, d.instance(e, fmt.Sprintf("%s[%d]", path, i)))
		}
		return out
	case vObject:
		out := make(map[string]any, len(v.members))
		first := make(map[string]*member, len(v.members))
		for i := range v.members {
			m := &v.members[i]
			kp := keyPath(path, m.key)
			switch f, dup := first[m.key]; {
			case m.bad != "":
				d.p.addAt(m.line, m.col, "spec", kp+": "+m.bad)
			case dup:
				d.p.addAt(m.line, m.col, "spec", fmt.Sprintf("%s: duplicate key (first at line %d, column %d)", kp, f.line, f.col))
			default:
				first[m.key] = m
				out[m.key] = d.instance(m.val, kp)
			}
		}
		return out
	case vOther:
		d.addAt(v, fieldName(path), "a value tagged "+quote(v.tag)+", which JSON has no form for")
	}
	return nil
}

// fieldName is a problem's field for a value's path: "spec" for the
// document itself.
func fieldName(path string) string {
	if path == "" {
		return "spec"
	}
	return path
}

// jsonNumber writes a number as JSON does: a whole number as an integer
// (YAML's 0x10 is 16, 2.0 is 2), one too large for a float64 as 1e999 with
// its sign, so that the schema's bounds refuse it; msg is set for NaN.
func jsonNumber(v *value) (json.Number, string) {
	if _, err := strconv.ParseInt(v.num, 10, 64); err == nil {
		return json.Number(v.num), ""
	}
	f, err := strconv.ParseFloat(v.num, 64)
	switch {
	case math.IsNaN(f) || (err != nil && !errors.Is(err, strconv.ErrRange)):
		return "", quote(v.text) + " is not a number"
	case math.IsInf(f, 1):
		return "1e999", ""
	case math.IsInf(f, -1):
		return "-1e999", ""
	case f == math.Trunc(f) && math.Abs(f) < 1<<63:
		return json.Number(strconv.FormatInt(int64(f), 10)), ""
	}
	return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), ""
}

// input keeps a node's input in v.raw: as written in JSON, converted from
// YAML.
func (d *specDecoder) input(field string, v *value) {
	if v.yaml == nil {
		return
	}
	raw, msg, line := yamlToJSON(v.yaml)
	switch {
	case msg == "":
		v.raw = raw
	case line > 0: // the library's line is the closer one
		d.addAt(&value{line: line}, field, msg)
	default:
		d.addAt(v, field, msg)
	}
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

// durationMessage is what is wrong with a duration as written, "" if
// nothing is: a string as Go reads durations, a number as seconds.
func durationMessage(v *value) string {
	var msg string
	switch v.kind {
	case vString:
		_, msg = durationOf(v.text)
	case vNumber:
		_, msg = secondsOf(v.num, v.text)
	}
	return msg
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
