package spec_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/batonrun/baton/spec"
)

// compileSchema compiles spec.Schema() as an editor or a linter would,
// asserting formats (start_at is a date-time).
func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(spec.Schema()))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	require.NoError(t, c.AddResource("run.schema.json", doc))
	s, err := c.Compile("run.schema.json")
	require.NoError(t, err, "the schema is valid JSON Schema 2020-12")
	return s
}

// instance reads a spec file as a schema validator sees it: one JSON or
// YAML document (the format told apart as spec.Parse does), or an error
// when the text is no single document.
func instance(data []byte, format spec.Format) (any, error) {
	text := bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	trimmed := bytes.TrimSpace(text)
	if len(trimmed) == 0 {
		return nil, errors.New("empty")
	}
	if format == spec.JSON || (format == spec.Auto && (trimmed[0] == '{' || trimmed[0] == '[')) {
		return jsonschema.UnmarshalJSON(bytes.NewReader(text))
	}
	dec := yaml.NewDecoder(bytes.NewReader(text))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("more than one document (%v)", err)
	}
	datesAsText(&doc)
	var v any
	if err := doc.Decode(&v); err != nil {
		return nil, err
	}
	return plain(v), nil
}

// datesAsText keeps a plain 2024-06-01 a string, as the parser reads it:
// JSON has no dates.
func datesAsText(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!timestamp" {
		n.Tag = "!!str"
	}
	for _, c := range n.Content {
		datesAsText(c)
	}
}

// plain turns what yaml decodes into the JSON data model.
func plain(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = plain(e)
		}
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[fmt.Sprint(k)] = plain(e)
		}
		return m
	case []any:
		for i, e := range v {
			v[i] = plain(e)
		}
	}
	return v
}

// schemaCannotSee lists the refused specs whose only problems are ones a
// JSON Schema cannot express; the parser alone refuses them.
var schemaCannotSee = map[string]string{
	"duplicate-keys.json": "a JSON document with a key twice is one value to a validator (the last key wins)",
	"long-cycle.json":     "a dependency cycle",
}

// The published schema, read as an editor or a linter reads it (without
// baton's formats), agrees with baton on which specs are valid, and so does
// Validate on a Run built in Go from the same values: every spec of
// testdata/specs, the examples' specs and the cases below is accepted by
// all three or refused by all three, but for the checks only Go can make
// (listed in schemaCannotSee and marked goOnly below). A rule added to the
// schema and not to Validate, which Go programs that build a Run rely on,
// fails here.
func TestSchemaAgreesWithParser(t *testing.T) {
	t.Parallel()
	sch := compileSchema(t)
	// zeroIsUnset: the spec's refused value is a zero, which a Run built
	// in Go cannot tell from an unset field ("cost": 0).
	check := func(t *testing.T, name string, data []byte, format spec.Format, goOnly, zeroIsUnset bool) {
		t.Helper()
		var goErr error
		s, err := spec.ParseAs(data, format)
		if err == nil {
			_, err = s.Compile(spec.Limits{})
		}
		goErr = err
		inst, err := instance(data, format)
		if err == nil {
			err = sch.Validate(inst)
		}
		schemaErr := err
		switch {
		case goOnly:
			require.Error(t, goErr, "%s: baton refuses it", name)
			require.NoError(t, schemaErr, "%s: marked as beyond a schema, but the schema refuses it too: unmark it", name)
		case goErr == nil:
			require.NoError(t, schemaErr, "%s: baton accepts it, the schema refuses it", name)
		default:
			require.Error(t, schemaErr, "%s: baton refuses it (%v), the schema accepts it", name, goErr)
		}
		// The same values as a Run built in Go, where they fit its types
		// (encoding/json reads "ID" as "id": a key's spelling is the
		// document's, not a value's).
		j, err := json.Marshal(inst)
		if err != nil || zeroIsUnset || keyProblem(schemaErr) || filepath.Base(name) == "duplicate-keys.json" {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(j))
		dec.DisallowUnknownFields()
		var r spec.Run
		if dec.Decode(&r) != nil {
			return
		}
		structErr := r.Validate(spec.Limits{})
		if structErr == nil {
			_, structErr = r.Compile(spec.Limits{})
		}
		if goOnly || schemaErr != nil {
			require.Error(t, structErr, "%s: Validate accepts as a Run what the schema refuses", name)
		} else {
			require.NoError(t, structErr, "%s: Validate refuses as a Run what the schema accepts", name)
		}
	}
	var files []string
	for _, dir := range []string{"ok", "bad"} {
		files = append(files, specFiles(t, dir)...)
	}
	files = append(files, filepath.Join("..", "examples", "deploy", "run.json"),
		filepath.Join("..", "js", "run.json"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		_, goOnly := schemaCannotSee[filepath.Base(f)]
		check(t, f, data, spec.FormatOf(f), goOnly, false)
	}

	node := `{"id": "a", "kind": "noop"}`
	run := func(fields string) string {
		if fields != "" {
			fields += ", "
		}
		return `{` + fields + `"nodes": [` + node + `]}`
	}
	for _, tc := range []struct {
		spec                string
		goOnly, zeroIsUnset bool
	}{
		{spec: run(`"id": ""`)}, {spec: run(`"id": "r.1_x-Y"`)}, {spec: run(`"id": ".."`)},
		{spec: run(`"id": "a b"`)}, {spec: run(`"id": "` + strings.Repeat("x", 128) + `"`)},
		{spec: run(`"id": "` + strings.Repeat("x", 129) + `"`)}, {spec: run(`"id": 7`)},
		{spec: run(`"thread": "t", "multitask": "enqueue"`)}, {spec: run(`"multitask": "enqueue"`)},
		{spec: run(`"multitask": ""`)}, {spec: run(`"multitask": null`)}, {spec: run(`"thread": "", "multitask": "reject"`)},
		{spec: run(`"thread": "t", "multitask": "queue"`)},
		{spec: run(`"start_at": "2030-01-02T03:04:05Z"`)}, {spec: run(`"start_at": "tomorrow"`)},
		{spec: run(`"start_in": "90s"`)}, {spec: run(`"start_in": 1.5`)}, {spec: run(`"start_in": "-5s"`)},
		{spec: run(`"start_in": "-0s"`)}, {spec: run(`"start_in": "0"`)}, {spec: run(`"start_in": "soon"`)},
		{spec: run(`"start_at": "2030-01-02T03:04:05Z", "start_in": "5s"`)},
		{spec: run(`"start_at": "2030-01-02T03:04:05Z", "start_in": 0`)},
		{spec: run(`"start_at": "2030-01-02T03:04:05Z", "start_in": "0s"`)},
		{spec: run(`"start_in": "9999999999h"`), goOnly: true},
		{spec: run(`"timeout": "10m"`)}, {spec: run(`"timeout": 30`)}, {spec: run(`"timeout": "-5s"`)},
		{spec: run(`"timeout": "soon"`)}, {spec: run(`"timeout": null`)}, {spec: run(`"timeout": true`)},
		{spec: run(`"notify": {"url": "https://hooks.example.com/x?y=1"}`)}, {spec: run(`"notify": {"url": "HTTP://h"}`)},
		{spec: run(`"notify": {"url": "ftp://h"}`)}, {spec: run(`"notify": {"url": "https://u:p@h/"}`)},
		{spec: run(`"notify": {"url": "https:///x"}`)}, {spec: run(`"notify": {}`)}, {spec: run(`"notify": null`)},
		{spec: run(`"notify": {"url": "https://h", "secret": "x"}`)},
		{spec: `{"nodes": []}`}, {spec: `{"nodes": null}`}, {spec: `{}`}, {spec: `{"nodes": [` + node + `], "extra": 1}`},
		{spec: `{"nodes": [{"id": "a"}]}`}, {spec: `{"nodes": [{"id": "a", "kind": ""}]}`},
		{spec: `{"nodes": [{"id": "a", "kind": "ex ec"}]}`}, {spec: `{"nodes": [{"kind": "noop"}]}`},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "max_attempts": 0}]}`},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "max_attempts": 1000}]}`},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "max_attempts": 1001}]}`},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "max_attempts": -1}]}`},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "max_attempts": 2.0}]}`},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "max_attempts": 2.5}]}`},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "timeout": "1h2m3.5s"}]}`},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "timeout": "+5s"}]}`},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "timeout": "5"}]}`},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "timeout": 1e30}]}`},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "timeout": true}]}`},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "queue": ""}]}`},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "queue": "q:1"}]}`},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "retry": {"backoff": "fixed", "base": "1s", "max": 5, "jitter": false}}]}`},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "retry": {"backoff": "linear"}}]}`},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "retry": {"jitter": "no"}}]}`},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "retry": {"tries": 3}}]}`},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "retry": "fixed"}]}`},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "retry": {"base": "5s", "max": "1s"}}]}`, goOnly: true},
		{spec: `{"id": "r", "nodes": [{"id": "a", "kind": "noop", "limits": ["openai", "tenant:{thread}", {"name": "tpm", "cost": 9}]}]}`},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "limits": null}]}`},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "limits": "openai"}]}`},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "limits": ["a b"]}]}`},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "limits": ["{bogus}"]}]}`},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "limits": [{"name": "x", "cost": 0}]}]}`, zeroIsUnset: true},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "limits": [{"name": "x", "costs": 2}]}]}`},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "limits": ["x", "x"]}]}`},
		{spec: `{"id": "r", "nodes": [{"id": "a", "kind": "noop", "limits": ["t:{input.t}"]}]}`, goOnly: true},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "limits": ["r:{run}"]}]}`, goOnly: true},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "deps": ["b", "b"]}, {"id": "b", "kind": "noop"}]}`},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "deps": [1]}]}`},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "deps": ["zz"]}]}`, goOnly: true},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "deps": ["a"]}]}`, goOnly: true},
		{spec: `{"nodes": [` + node + `, ` + node + `]}`, goOnly: true},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "input": {"$dep": "b"}}]}`, goOnly: true},
		{spec: `{"nodes": [{"id": "a", "kind": "noop", "input": "` + strings.Repeat("x", 1<<20) + `"}]}`, goOnly: true},
		{spec: "nodes:\n  - {id: a, kind: noop, timeout: 90}\n"},
		{spec: "start_at: 2030-01-02T03:04:05Z\nnodes:\n  - {id: a, kind: noop}\n"},
		{spec: "nodes:\n  - {id: a, kind: noop, max_attempts: 0x10}\n"},
	} {
		check(t, tc.spec[:min(len(tc.spec), 120)], []byte(tc.spec), spec.Auto, tc.goOnly, tc.zeroIsUnset)
	}
}

// keyProblem reports whether a schema error names an unknown key.
func keyProblem(err error) bool {
	var v *jsonschema.ValidationError
	if !errors.As(err, &v) {
		return false
	}
	var walk func(e *jsonschema.ValidationError) bool
	walk = func(e *jsonschema.ValidationError) bool {
		if _, ok := e.ErrorKind.(*kind.AdditionalProperties); ok {
			return true
		}
		for _, c := range e.Causes {
			if walk(c) {
				return true
			}
		}
		return false
	}
	return walk(v)
}
