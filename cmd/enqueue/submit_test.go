package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const diamond = `{"nodes": [
  {"id": "fetch", "kind": "noop"},
  {"id": "build", "kind": "exec", "deps": ["fetch"], "input": {"command": ["make"]}},
  {"id": "ship", "kind": "http", "deps": ["fetch", "build"], "max_attempts": 5, "timeout": "90s"},
  {"id": "lint", "kind": "noop"}]}`

func TestSubmitPrintsRunIDAndStatusShowsTheDAG(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.submit(t, diamond)
	require.True(t, strings.HasPrefix(id, "run-"), "a spec without id gets a generated one: %q", id)

	s := b.status(t, id)
	require.Equal(t, id, s.ID)
	require.Equal(t, "RUNNING", s.Status)
	require.Equal(t, map[string]string{"fetch": "READY", "build": "BLOCKED", "ship": "BLOCKED", "lint": "READY"}, states(s))
	for _, n := range s.Nodes {
		require.Zero(t, n.Epoch)
		require.Empty(t, n.Owner)
		require.Equal(t, "null", string(n.Result))
	}

	// The human table lists every node with its state.
	r := b.run(t, "", "status", id)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "NODE")
	for node, state := range states(s) {
		require.Regexp(t, `(?m)^`+node+`\s+`+state+`\s`, r.stdout)
	}
}

func TestSubmitYAMLFile(t *testing.T) {
	t.Parallel()
	b := setup(t)
	path := filepath.Join(t.TempDir(), "deploy.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
id: deploy-42
thread: chat-7
nodes:
  - id: build
    kind: exec
    input:
      command: [make, all]
  - id: ship
    kind: http
    deps: [build]
    timeout: 5m
`), 0o644))
	r := b.run(t, "", "submit", path)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "deploy-42\n", r.stdout)

	s := b.status(t, "deploy-42")
	require.Equal(t, "chat-7", s.Thread)
	require.Equal(t, map[string]string{"build": "READY", "ship": "BLOCKED"}, states(s))
}

func TestSubmitInvalidSpecExits2NamingTheField(t *testing.T) {
	t.Parallel()
	b := setup(t)
	big := `{"nodes": [{"id": "a", "kind": "noop", "input": "` + strings.Repeat("x", 100) + `"}]}`
	for _, tc := range []struct {
		name, spec string
		env        []string
		want       []string // each on a line of stderr
	}{
		{name: "cycle", spec: `{"nodes": [{"id": "a", "kind": "noop", "deps": ["c"]},
			{"id": "b", "kind": "noop", "deps": ["a"]}, {"id": "c", "kind": "noop", "deps": ["b"]}]}`,
			want: []string{"nodes: dependency cycle: a -> c -> b -> a"}},
		{name: "unknown dep", spec: `{"nodes": [{"id": "a", "kind": "noop"}, {"id": "b", "kind": "noop"},
			{"id": "c", "kind": "noop", "deps": ["a", "x"]}]}`,
			want: []string{`nodes[2].deps[1]: unknown node "x"`}},
		{name: "duplicate id", spec: `{"nodes": [{"id": "a", "kind": "noop"}, {"id": "a", "kind": "noop"}]}`,
			want: []string{`nodes[1].id: duplicate node id "a" (also nodes[0])`}},
		{name: "brace in ids", spec: `{"id": "run{1}", "nodes": [{"id": "a}", "kind": "noop"}]}`,
			want: []string{`stdin: id: `, `'{' at byte 3`, `stdin: nodes[0].id: `, `'}' at byte 1`}},
		{name: "no nodes", spec: `{"id": "r", "nodes": []}`,
			want: []string{"nodes: a run needs at least one node"}},
		{name: "input over MAX_INPUT_BYTES", spec: big, env: []string{"MAX_INPUT_BYTES=64"},
			want: []string{"nodes[0].input: 102 bytes, at most 64"}},
		{name: "spec over MAX_SPEC_BYTES", spec: big, env: []string{"MAX_INPUT_BYTES=64", "MAX_SPEC_BYTES=100"},
			want: []string{"stdin: spec: more than 100 bytes, at most 100 (MAX_SPEC_BYTES)"}},
		{name: "every problem at once", spec: `{"nodes": [{"id": "a", "kind": ""}, {"id": "b", "kind": "noop", "deps": ["z"], "max_attempts": -1}]}`,
			want: []string{"nodes[0].kind: empty", `nodes[1].deps[0]: unknown node "z"`, "nodes[1].max_attempts: -1"}},
		{name: "unknown field", spec: `{"nodes": [{"id": "a", "kind": "noop", "max_atempts": 2}]}`,
			want: []string{"spec: ", "max_atempts"}},
		{name: "not a spec", spec: "\x00\x01 ::: [", want: []string{"spec: "}},
		{name: "empty", spec: "", want: []string{"spec: empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := enqueue(t, slices.Concat(b.env, tc.env), tc.spec, "submit", "-")
			require.Equal(t, 2, r.code, "stderr: %s", r.stderr)
			require.Empty(t, r.stdout)
			for _, w := range tc.want {
				require.Contains(t, r.stderr, w)
			}
			for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
				require.True(t, strings.HasPrefix(line, "enqueue: stdin: "), "one problem per line, each naming where: %q", line)
			}
		})
	}
	t.Run("nothing stored", func(t *testing.T) {
		t.Parallel()
		r := b.run(t, "", "list", "--json")
		require.Equal(t, 0, r.code, r.stderr)
		require.Equal(t, "[]\n", r.stdout)
	})
}

func TestSubmitFileErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)

	r := b.run(t, "", "submit", filepath.Join(t.TempDir(), "missing.json"))
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "missing.json")

	r = b.run(t, "", "submit", t.TempDir())
	require.Equal(t, 2, r.code, "a directory is not a spec")

	// A file over the spec cap (MAX_SPEC_BYTES, 8 MiB) is refused by its
	// size, unread (a sparse 36 MB file), in the words the API uses.
	huge := filepath.Join(t.TempDir(), "huge.json")
	f, err := os.Create(huge)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(36_000_000))
	require.NoError(t, f.Close())
	r = b.run(t, "", "submit", huge)
	require.Equal(t, 2, r.code)
	require.Equal(t, "enqueue: "+huge+": spec: 36000000 bytes, at most 8388608 (MAX_SPEC_BYTES)\n", r.stderr)

	r = b.run(t, "", "submit")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "usage: enqueue submit")
}

func TestResubmit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	spec := `{"id": "nightly-1", "nodes": [{"id": "a", "kind": "noop"}, {"id": "b", "kind": "noop", "deps": ["a"]}]}`
	require.Equal(t, "nightly-1", b.submit(t, spec))
	// Whitespace and key order do not make another spec.
	same := `{"nodes": [{"kind": "noop", "id": "a"}, {"deps": ["a"], "kind": "noop", "id": "b"}], "id": "nightly-1"}`
	require.Equal(t, "nightly-1", b.submit(t, same))

	r := b.run(t, `{"id": "nightly-1", "nodes": [{"id": "a", "kind": "noop"}]}`, "submit", "-")
	require.Equal(t, 1, r.code, "stderr: %s", r.stderr)
	require.Empty(t, r.stdout)
	require.Contains(t, r.stderr, "run nightly-1 exists with a different spec")

	require.Equal(t, map[string]string{"a": "READY", "b": "BLOCKED"}, states(b.status(t, "nightly-1")),
		"the refused spec changed nothing")
}

// A spec file is parsed strictly in the format its name says: a JSON file
// with a trailing comma is refused with its line and column (never read
// again as YAML), and so is a key that differs from a field only in case.
func TestSubmitRefusesLooseJSON(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dir := t.TempDir()
	for name, tc := range map[string]struct{ spec, says string }{
		"comma.json": {"{\"id\": \"a\",\n \"nodes\": [{\"id\": \"n\", \"kind\": \"noop\"},]}", "line 2"},
		"case.json":  {`{"id": "a", "ID": "b", "nodes": [{"id": "n", "kind": "noop"}]}`, "ID: unknown field"},
	} {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(tc.spec), 0o644))
		r := b.run(t, "", "submit", path)
		require.Equal(t, 2, r.code, "%s: %s", name, r.stderr)
		require.Contains(t, r.stderr, tc.says, name)
		require.NotContains(t, r.stderr, "Go value", name)
	}
	r := b.run(t, "", "status", "a")
	require.Equal(t, 1, r.code, "nothing was stored: %s", r.stdout)
}

// Every refused spec of the spec suite (spec/testdata/specs/bad) is refused
// by enqueue submit with exit 2 and exactly the problems its .err file
// lists, a line each, naming the file: the schema's words reach the CLI
// unchanged.
func TestSubmitRefusesTheSpecSuiteInItsWords(t *testing.T) {
	t.Parallel()
	b := setup(t)
	files, err := filepath.Glob(filepath.Join("..", "..", "spec", "testdata", "specs", "bad", "*"))
	require.NoError(t, err)
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, ".err") {
			continue
		}
		n++
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			want, err := os.ReadFile(f + ".err")
			require.NoError(t, err)
			r := b.run(t, "", "submit", f)
			require.Equal(t, 2, r.code, "stderr: %s", r.stderr)
			require.Empty(t, r.stdout)
			var lines []string
			for _, l := range strings.Split(strings.TrimSpace(string(want)), "\n") {
				lines = append(lines, "enqueue: "+f+": "+l)
			}
			require.Equal(t, strings.Join(lines, "\n"), strings.TrimSpace(r.stderr))
		})
	}
	require.Greater(t, n, 10)
}
