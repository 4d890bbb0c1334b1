package spec_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/spec"
)

// Every problem in a spec is reported at once, each naming its field.
func TestSpecErrorsNameTheField(t *testing.T) {
	t.Parallel()
	big := `"` + strings.Repeat("x", 2000) + `"`
	for _, tc := range []struct {
		name, spec string
		fields     []string
	}{
		{"empty run", `{"nodes":[]}`, []string{"nodes"}},
		{"brace in run id", `{"id":"a{b}","nodes":[{"id":"a","kind":"noop"}]}`, []string{"id"}},
		{"colon in node id", `{"nodes":[{"id":"a:b","kind":"noop"}]}`, []string{"nodes[0].id"}},
		{"space in thread", `{"thread":"a b","nodes":[{"id":"a","kind":"noop"}]}`, []string{"thread"}},
		{"long id", `{"nodes":[{"id":"` + strings.Repeat("n", 129) + `","kind":"noop"}]}`, []string{"nodes[0].id"}},
		{"missing kind", `{"nodes":[{"id":"a"}]}`, []string{"nodes[0].kind"}},
		{"duplicate node", `{"nodes":[{"id":"a","kind":"noop"},{"id":"a","kind":"noop"}]}`, []string{"nodes[1].id"}},
		{"unknown dep", `{"nodes":[{"id":"a","kind":"noop","deps":["zz"]}]}`, []string{"nodes[0].deps[0]"}},
		{"self dep", `{"nodes":[{"id":"a","kind":"noop","deps":["a"]}]}`, []string{"nodes[0].deps[0]"}},
		{"cycle", `{"nodes":[{"id":"a","kind":"noop","deps":["c"]},{"id":"b","kind":"noop","deps":["a"]},{"id":"c","kind":"noop","deps":["b"]}]}`, []string{"nodes"}},
		{"oversized input", `{"nodes":[{"id":"a","kind":"noop","input":` + big + `}]}`, []string{"nodes[0].input"}},
		{"multitask without thread", `{"multitask":"reject","nodes":[{"id":"a","kind":"noop"}]}`, []string{"thread"}},
		{"unknown multitask", `{"thread":"t","multitask":"queue","nodes":[{"id":"a","kind":"noop"}]}`, []string{"multitask"}},
		{"several at once", `{"id":"{x}","nodes":[{"id":"","kind":""},{"id":"b","kind":"noop","deps":["q"]}]}`,
			[]string{"id", "nodes[0].id", "nodes[0].kind", "nodes[1].deps[0]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := spec.Parse([]byte(tc.spec)) // the schema's problems, with Go's
			if err == nil {
				err = s.Validate(spec.Limits{MaxInputBytes: 1000})
			}
			require.ErrorIs(t, err, spec.ErrInvalid)
			var got []string
			for _, e := range unjoin(err) {
				var se *spec.Error
				require.True(t, errors.As(e, &se), "%v is not a *Error", e)
				got = append(got, se.Field)
			}
			require.ElementsMatch(t, tc.fields, got, err.Error())
		})
	}
}

func TestSpecParsesJSONAndYAML(t *testing.T) {
	t.Parallel()
	y, err := spec.Parse([]byte("id: r1\nnodes:\n  - id: a\n    kind: sleep\n    input: {duration: 2s}\n    timeout: 90\n  - {id: b, kind: noop, deps: [a]}\n"))
	require.NoError(t, err)
	require.NoError(t, y.Validate(spec.Limits{}))
	require.Equal(t, "r1", y.ID)
	require.Equal(t, []string{"a"}, y.Nodes[1].Deps)
	require.JSONEq(t, `{"duration":"2s"}`, string(y.Nodes[0].Input))
	require.Equal(t, 90*time.Second, time.Duration(y.Nodes[0].Timeout))

	_, err = spec.Parse([]byte(`{"nodes":[{"id":"a","kind":"noop","max_atempts":3}]}`))
	require.ErrorIs(t, err, spec.ErrInvalid, "a misspelt field is an error, not a silent default")
	require.Contains(t, err.Error(), "max_atempts")
	_, err = spec.Parse([]byte("  "))
	require.ErrorIs(t, err, spec.ErrInvalid)
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// The format follows a file's name or a request's media type when they
// name one; otherwise a spec starting with "{" or "[" is JSON, and invalid
// JSON is refused, never read again as YAML.
func TestSpecFormat(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]spec.Format{
		"run.json": spec.JSON, "specs.d/RUN.YAML": spec.YAML, "run.yml": spec.YAML,
		"application/json": spec.JSON, "application/json; charset=utf-8": spec.JSON,
		"application/vnd.baton+json": spec.JSON, "application/yaml": spec.YAML,
		"application/x-yaml": spec.YAML, "text/yaml; charset=utf-8": spec.YAML,
		"": spec.Auto, "-": spec.Auto, "stdin": spec.Auto, "run.txt": spec.Auto,
		"text/plain": spec.Auto, "application/x-www-form-urlencoded": spec.Auto,
	} {
		require.Equal(t, want, spec.FormatOf(in), in)
	}

	flow := []byte("{id: r1, nodes: [{id: a, kind: noop}]}")
	_, err := spec.Parse(flow)
	require.ErrorIs(t, err, spec.ErrInvalid)
	require.ErrorContains(t, err, "start it with ---", "the error says how to write YAML in flow style")
	s, err := spec.ParseAs(flow, spec.YAML)
	require.NoError(t, err, "a .yaml file may be in flow style")
	require.Equal(t, "r1", s.ID)
	s, err = spec.Parse(append([]byte("---\n"), flow...))
	require.NoError(t, err)
	require.Equal(t, "r1", s.ID)

	_, err = spec.ParseAs([]byte("id: r1\nnodes: [{id: a, kind: noop}]\n"), spec.JSON)
	require.ErrorContains(t, err, "invalid JSON", "a .json file is JSON")

	trailing := []byte(`{"id": "r", "nodes": [{"id": "a", "kind": "noop"},]}`)
	_, err = spec.Parse(trailing)
	require.ErrorContains(t, err, "trailing comma")
	_, err = spec.ParseAs(trailing, spec.JSON)
	require.ErrorContains(t, err, "trailing comma")
}

// A spec cannot name one run and create another: keys are matched
// exactly, and a second "id" or an "ID" is refused, not picked.
func TestSpecKeysMatchExactly(t *testing.T) {
	t.Parallel()
	for _, text := range []string{
		`{"id": "a", "ID": "b", "nodes": [{"id": "n", "kind": "noop"}]}`,
		`{"id": "a", "id": "b", "nodes": [{"id": "n", "kind": "noop"}]}`,
		"id: a\nId: b\nnodes: [{id: n, kind: noop}]\n",
		"id: a\nid: b\nnodes: [{id: n, kind: noop}]\n",
		`{"id": "a", "nodes": [{"id": "n", "Kind": "exec", "kind": "noop"}]}`,
	} {
		s, err := spec.Parse([]byte(text))
		require.ErrorIs(t, err, spec.ErrInvalid, text)
		require.Nil(t, s)
		require.Regexp(t, `\(line \d+, column \d+\)`, err.Error(), "the problem says where")
	}
}

// A few kilobytes of YAML aliases cannot make the parser expand billions
// of values: the expansion is bounded and refused.
func TestSpecYAMLAliasesAreBounded(t *testing.T) {
	t.Parallel()
	doc := "nodes: [&n {id: a, kind: noop, deps: [" + strings.Repeat("x, ", 5000) + "]}, " +
		strings.Repeat("*n, ", 5000) + "]" // 25 million deps once expanded
	_, err := spec.Parse([]byte(doc))
	require.ErrorContains(t, err, "once YAML aliases are expanded")
	checkSpecError(t, err)

	// Nine lines that expand to a billion: the bound is 16 values a byte
	// (and 65536), so a small document cannot make the API allocate much,
	// even where the aliases sit under keys the schema refuses.
	var bomb strings.Builder
	bomb.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&bomb, "a%d: &a%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 10), ", "))
	}
	bomb.WriteString("nodes: [{id: a, kind: noop}]\n")
	_, err = spec.Parse([]byte(bomb.String()))
	require.ErrorContains(t, err, fmt.Sprintf("more than %d values once YAML aliases are expanded", 16*bomb.Len()+65536))
	checkSpecError(t, err)
}

// Timeouts read by encoding/json (a Run decoded directly) get the same
// checks: an overflowing number is too large, not negative.
func TestDurationJSON(t *testing.T) {
	t.Parallel()
	var d spec.Duration
	require.NoError(t, json.Unmarshal([]byte(`"1m30s"`), &d))
	require.Equal(t, 90*time.Second, time.Duration(d))
	require.NoError(t, json.Unmarshal([]byte(`1.5`), &d))
	require.Equal(t, 1500*time.Millisecond, time.Duration(d))
	require.ErrorContains(t, json.Unmarshal([]byte(`1e30`), &d), "too large")
	require.ErrorContains(t, json.Unmarshal([]byte(`"9999999999h"`), &d), "too large")
	require.ErrorContains(t, json.Unmarshal([]byte(`"-5s"`), &d), "negative")
	require.ErrorContains(t, json.Unmarshal([]byte(`"soon"`), &d), `want a duration such as "90s"`)
	// As a cancel's reason says it: no zero units at the end.
	for in, want := range map[string]string{`"10m"`: "10m", `"1h"`: "1h", `"1h30m"`: "1h30m", `90`: "1m30s", `0.5`: "500ms"} {
		require.NoError(t, json.Unmarshal([]byte(in), &d))
		require.Equal(t, want, d.String(), in)
	}
}

// A run's timeout is read like a node's, and a bad one is refused naming
// the run's field, with its line.
func TestRunTimeout(t *testing.T) {
	t.Parallel()
	s, err := spec.Parse([]byte("timeout: 10m\nnodes:\n  - {id: a, kind: noop}\n"))
	require.NoError(t, err)
	require.Equal(t, 10*time.Minute, time.Duration(s.Timeout))
	require.NoError(t, s.Validate(spec.Limits{}))
	_, err = spec.Parse([]byte("nodes:\n  - {id: a, kind: noop}\ntimeout: soon\n"))
	require.ErrorIs(t, err, spec.ErrInvalid)
	require.ErrorContains(t, err, "line 3")
	require.ErrorContains(t, err, `timeout: "soon": want a duration such as "90s"`)
	_, err = spec.Parse([]byte(`{"timeout": "-1s", "nodes": [{"id": "a", "kind": "noop"}]}`))
	require.ErrorContains(t, err, `timeout: "-1s" is negative`)
}

// One cap holds a whole spec, however it arrives: the text as written
// (what enqueue and the HTTP API read), or the JSON encoding of a Run
// built in Go (what client.Submit compiles); the error names both sizes.
func TestSpecSizeCap(t *testing.T) {
	t.Parallel()
	lim := spec.Limits{MaxSpecBytes: 1000, MaxInputBytes: 5000}
	input := json.RawMessage(`"` + strings.Repeat("x", 2000) + `"`)
	built := &spec.Run{Nodes: []spec.Node{{ID: "a", Kind: "noop", Input: input}}}
	_, err := built.Compile(lim)
	require.ErrorIs(t, err, spec.ErrInvalid)
	enc, _ := json.Marshal(built)
	require.EqualError(t, err, fmt.Sprintf("spec: %d bytes, at most 1000 (MAX_SPEC_BYTES)", len(enc)))

	text := []byte(`{"nodes": [{"id": "a", "kind": "noop", "input": ` + string(input) + `}]}`)
	parsed, err := spec.Parse(text)
	require.NoError(t, err)
	require.EqualError(t, parsed.Validate(lim), fmt.Sprintf("spec: %d bytes, at most 1000 (MAX_SPEC_BYTES)", len(text)))

	small := &spec.Run{Nodes: []spec.Node{{ID: "a", Kind: "noop", Input: json.RawMessage(`{"x": 1}`)}}}
	_, err = small.Compile(lim)
	require.NoError(t, err)
	require.EqualError(t, spec.Limits{}.CheckSize(9<<20), "spec: 9437184 bytes, at most 8388608 (MAX_SPEC_BYTES)", "the default cap is 8 MiB")
}

// The stock kinds' input is checked at submit, like the rest of the spec:
// a field the kind does not read is refused, named, with the field it
// most likely meant; a field it needs is named when missing. A
// dependency's result as the whole input is known only when it runs.
func TestStockKindInputCheckedAtSubmit(t *testing.T) {
	t.Parallel()
	s, err := spec.ParseAs([]byte(`{"id": "r", "nodes": [
		{"id": "a", "kind": "exec", "input": {"comand": ["ls"]}},
		{"id": "b", "kind": "http", "input": {"url": "https://example.com", "header": {}}},
		{"id": "c", "kind": "sleep", "input": {"duration": "1s"}},
		{"id": "d", "kind": "exec", "deps": ["c"], "input": {"$dep": "c"}},
		{"id": "e", "kind": "mine", "input": {"comand": 1}}]}`), spec.JSON)
	require.NoError(t, err)
	err = s.Validate(spec.Limits{})
	require.Error(t, err)
	msg := err.Error()
	require.Contains(t, msg, `nodes[0].input.comand: unknown field of the exec kind's input; did you mean "command"?`)
	require.Contains(t, msg, "nodes[0].input.command: missing")
	require.Contains(t, msg, `nodes[1].input.header: unknown field of the http kind's input; did you mean "headers"?`)
	require.NotContains(t, msg, "nodes[2]")
	require.NotContains(t, msg, "nodes[3]")
	require.NotContains(t, msg, "nodes[4]", "a kind of the user's own reads what it likes")
	s, err = spec.ParseAs([]byte(`{"id": "r", "nodes": [{"id": "a", "kind": "exec", "input": {"command": ["ls"], "env": {"A": "1"}}}]}`), spec.JSON)
	require.NoError(t, err)
	require.NoError(t, s.Validate(spec.Limits{}))
}
