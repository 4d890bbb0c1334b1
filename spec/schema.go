package spec

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/batonrun/baton/fence/ids"
)

// schemaJSON is the run spec's JSON Schema (2020-12). It decides what a
// spec document may hold: ParseAs validates every document against it,
// with the library an editor, a linter or another language would use, and
// makes in Go only the checks a schema cannot express: duplicate keys,
// dependency references and cycles, duplicate node ids, the limits a
// caller sets (input and node count), limit-name templates (Validate).
// The admin server serves it at /v1/schemas/run.json.
//
// The schema carries its own words: a subschema's title is the value it
// wants ("want a list of node ids, got a string") and its errorMessage
// what is said when a value breaks any other of its rules. Go adds the
// field path and the line, and words the rules of ids, durations, limit
// names and webhook URLs in detail (explain); it never accepts what the
// schema refuses.
//
//go:embed run.schema.json
var schemaJSON []byte

// Schema returns the run spec's JSON Schema (a copy).
func Schema() []byte { return slices.Clone(schemaJSON) }

// schemaName is the schema's location as the compiler knows it.
const schemaName = "run.schema.json"

// compiledSchema is the schema compiled once, on the first spec read.
var compiledSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	// Durations and times are checked as Go reads them, so that what the
	// schema accepts always decodes.
	c.RegisterFormat(&jsonschema.Format{Name: "go-duration", Validate: func(v any) error {
		var msg string
		switch v := v.(type) {
		case string:
			_, msg = durationOf(v)
		case fmt.Stringer: // json.Number
			_, msg = secondsOf(v.String(), v.String())
		}
		if msg != "" {
			return errors.New(msg)
		}
		return nil
	}})
	c.RegisterFormat(&jsonschema.Format{Name: "date-time", Validate: func(v any) error {
		if s, ok := v.(string); ok {
			_, err := time.Parse(time.RFC3339Nano, s)
			return err
		}
		return nil
	}})
	if err := c.AddResource(schemaName, doc); err != nil {
		return nil, err
	}
	return c.Compile(schemaName)
})

// schemaDoc is the schema as a document, for the titles, messages and
// property names problems are worded with.
var schemaDoc = sync.OnceValue(func() *value {
	v, _ := parseJSON(schemaJSON, "") // TestSchemaCompiles: it parses
	return v
})

// validate checks a document against the schema, filing every problem the
// text checks have not already filed at the same field. failed lists the
// instance locations of the values that could not be decoded as they are
// (of a wrong type, out of range); a string that breaks a pattern can.
func validate(root *value, inst any, d *specDecoder) (failed [][]string) {
	sch, err := compiledSchema()
	if err != nil { // not reached: TestSchemaCompiles
		d.p.add("spec", "the run spec schema does not compile: "+err.Error())
		return nil
	}
	var verr *jsonschema.ValidationError
	if err := sch.Validate(inst); !errors.As(err, &verr) {
		return nil
	}
	for _, e := range leaves(verr) {
		d.schemaProblem(root, e)
		switch k := e.ErrorKind.(type) {
		case *kind.AdditionalProperties:
			for _, p := range k.Properties {
				failed = append(failed, append(slices.Clip(e.InstanceLocation), p))
			}
		case *kind.Type, *kind.AnyOf, *kind.Format, *kind.Minimum, *kind.Maximum,
			*kind.ExclusiveMinimum, *kind.ExclusiveMaximum, *kind.MultipleOf:
			failed = append(failed, e.InstanceLocation)
		}
	}
	return failed
}

// leaves are the failures that say what is wrong. Of an anyOf, they are
// those of the first branch the value's type fits ("limits": [{"name":
// "x", "cost": 0}] is wrong as an object, not as a string); when it fits
// none, the anyOf itself, worded as a wrong type.
func leaves(e *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return []*jsonschema.ValidationError{e}
	}
	if _, anyOf := e.ErrorKind.(*kind.AnyOf); anyOf {
		for _, c := range e.Causes {
			l := leaves(c)
			if !slices.ContainsFunc(l, func(x *jsonschema.ValidationError) bool {
				_, typ := x.ErrorKind.(*kind.Type)
				return typ && slices.Equal(x.InstanceLocation, e.InstanceLocation)
			}) {
				return l
			}
		}
		return []*jsonschema.ValidationError{e}
	}
	var out []*jsonschema.ValidationError
	for _, c := range e.Causes {
		out = append(out, leaves(c)...)
	}
	return out
}

// schemaProblem files one failure: under the field path of the value that
// failed, at its line and column, in the schema's words.
func (d *specDecoder) schemaProblem(root *value, e *jsonschema.ValidationError) {
	v, path := locate(root, e.InstanceLocation)
	if v == nil { // not reached: the instance was built from root
		d.p.add(fieldName(path), ruleBroken(e))
		return
	}
	field := fieldName(path)
	if d.reported[field] {
		return
	}
	sub, def := subschema(e.SchemaURL)
	errMsg := sub.member("errorMessage").str()
	switch k := e.ErrorKind.(type) {
	case *kind.AdditionalProperties:
		known := sub.member("properties").keys()
		for _, key := range k.Properties {
			for _, m := range v.members {
				if m.key == key {
					d.p.addAt(m.line, m.col, "spec", keyPath(path, key)+": unknown field; "+suggest(key, known))
					break
				}
			}
		}
	case *kind.Required:
		for _, key := range k.Missing {
			d.p.addAt(v.line, v.col, keyPath(path, key), cmpOr(errMsg, "missing"))
		}
	case *kind.Type, *kind.AnyOf:
		want := sub.member("title").str()
		if t, ok := k.(*kind.Type); ok && want == "" {
			want = typeWords(t.Want)
		}
		msg := "want " + want + ", got " + v.describe()
		if v.kind == vNumber && strings.Contains(want, "whole number") {
			msg = "want " + want + ", got " + clip(v.text)
		}
		if sub.member("type").str() == "string" || slices.Equal(sub.member("type").strs(), []string{"string", "null"}) {
			if v.kind == vNumber || v.kind == vBool {
				msg += "; quote it: " + quote(v.text)
			}
		}
		d.p.addAt(v.line, v.col, field, msg)
	case *kind.UniqueItems:
		i, j := k.Duplicates[0], k.Duplicates[1]
		if j < len(v.list) {
			dup := v.list[j]
			d.p.addAt(dup.line, dup.col, fmt.Sprintf("%s[%d]", path, j),
				fmt.Sprintf("%s %s (also %s[%d])", cmpOr(errMsg, "duplicate"), dup.shown(), lastName(path), i))
		}
	default:
		msg := explain(def, v)
		switch {
		case msg != "":
		case errMsg != "":
			msg = errMsg
			if s := v.shown(); s != "" {
				msg = s + ": " + msg
			}
		default: // not reached: every rule has words (TestSchemaHasWords)
			msg = ruleBroken(e)
		}
		d.p.addAt(v.line, v.col, field, msg)
	}
}

// ruleBroken names the schema rule a value breaks, for a rule without
// words of its own.
func ruleBroken(e *jsonschema.ValidationError) string {
	return "breaks the run spec schema's " + strings.Join(e.ErrorKind.KeywordPath(), "/") + " rule"
}

// lastName is a path's last part: "deps" of "nodes[1].deps".
func lastName(path string) string {
	if i := strings.LastIndexAny(path, ".]"); i >= 0 && path[i] == '.' {
		return path[i+1:]
	}
	return path
}

// shown is a scalar as a message quotes it: a string quoted, a number as
// written; "" for anything else.
func (v *value) shown() string {
	switch v.kind {
	case vString:
		return quote(v.text)
	case vNumber, vBool:
		return clip(v.text)
	}
	return ""
}

// typeWords words JSON Schema types: ["array", "null"] is "a list".
func typeWords(types []string) string {
	var out []string
	for _, t := range types {
		switch t {
		case "null":
		case "array":
			out = append(out, "a list")
		case "object":
			out = append(out, "an object")
		case "integer":
			out = append(out, "a whole number")
		case "boolean":
			out = append(out, "true or false")
		default:
			out = append(out, "a "+t)
		}
	}
	return strings.Join(out, " or ")
}

// explain words what is wrong with a value of a shared definition (its
// name in $defs) in more detail than one message can: which character of
// an id, why a duration is refused. "" when it has nothing to add.
func explain(def string, v *value) string {
	switch def {
	case "id", "optionalId":
		if v.kind == vString {
			return idProblem(v.text)
		}
	case "duration":
		return durationMessage(v)
	case "limitName":
		if v.kind == vString {
			return limitNameProblem(v.text)
		}
	case "webhookURL":
		if v.kind == vString {
			var msg string
			(&Notify{URL: v.text}).check(func(_, format string, a ...any) { msg = fmt.Sprintf(format, a...) })
			return msg
		}
	}
	return ""
}

// idProblem is what is wrong with an id, without the error's prefixes:
// "empty", "\" \" at byte 1 (allowed: ...)"; "" if nothing is.
func idProblem(id string) string {
	if err := ids.Validate("", id); err != nil {
		return idMessage(err)
	}
	return ""
}

// idMessage is an error of package ids without its field and the
// "invalid id" it wraps: the problem's field already says which id.
func idMessage(err error) string {
	s := err.Error()
	if _, rest, ok := strings.Cut(s, ids.ErrInvalid.Error()+": "); ok {
		return rest
	}
	return s
}

// locate finds the value at a schema error's instance location and its
// field path.
func locate(root *value, loc []string) (*value, string) {
	v, path := root, ""
	for _, seg := range loc {
		switch v.kind {
		case vObject:
			path = keyPath(path, seg)
			v = v.member(seg)
		case vList:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(v.list) {
				return nil, path
			}
			path = fmt.Sprintf("%s[%d]", path, i)
			v = v.list[i]
		default:
			return nil, path
		}
		if v == nil {
			return nil, path
		}
	}
	return v, path
}

// subschema is the schema object a failure names
// ("#/$defs/node/properties/deps"), and, when that object is a definition
// of $defs, its name.
func subschema(schemaURL string) (sub *value, def string) {
	_, frag, _ := strings.Cut(schemaURL, "#")
	var segs []string
	if frag != "" {
		segs = strings.Split(strings.TrimPrefix(frag, "/"), "/")
	}
	v := schemaDoc()
	for _, s := range segs {
		if u, err := url.PathUnescape(s); err == nil {
			s = u
		}
		s = pointerUnescape.Replace(s)
		switch {
		case v == nil:
		case v.kind == vList:
			i, _ := strconv.Atoi(s)
			if i >= 0 && i < len(v.list) {
				v = v.list[i]
			} else {
				v = nil
			}
		default:
			v = v.member(s)
		}
	}
	if len(segs) == 2 && segs[0] == "$defs" {
		def = segs[1]
	}
	return v, def
}

// pointerUnescape undoes a JSON pointer segment's escapes (RFC 6901).
var pointerUnescape = strings.NewReplacer("~1", "/", "~0", "~")

// str is a schema string's value; "" for anything else (or nil).
func (v *value) str() string {
	if v == nil || v.kind != vString {
		return ""
	}
	return v.text
}

// strs is a schema list of strings.
func (v *value) strs() []string {
	if v == nil || v.kind != vList {
		return nil
	}
	var out []string
	for _, e := range v.list {
		out = append(out, e.text)
	}
	return out
}

// keys are an object's keys, in the order written.
func (v *value) keys() []string {
	if v == nil {
		return nil
	}
	out := make([]string, 0, len(v.members))
	for _, m := range v.members {
		out = append(out, m.key)
	}
	return out
}
