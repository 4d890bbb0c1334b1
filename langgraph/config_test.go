package langgraph

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The example project's langgraph.json is read as LangGraph's CLI reads
// it: graph paths relative to the file, env from the .env file it names.
func TestLoadReadsTheExampleProject(t *testing.T) {
	p, err := Load(filepath.Join("..", "examples", "langgraph", "langgraph.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Graphs) != 3 {
		t.Fatalf("graphs: %v", p.Graphs)
	}
	g := p.Graphs["review"]
	if g.Lang != "python" || g.Attr != "make_graph" || g.File != filepath.Join(p.Dir, "review.py") {
		t.Errorf("review: %+v", g)
	}
	if p.Env["AGENT_GREETING"] != "hello" {
		t.Errorf("env: %v", p.Env)
	}
	if len(p.Dependencies) != 1 || p.Dependencies[0] != "." {
		t.Errorf("dependencies: %v", p.Dependencies)
	}
}

// Every refusal names what is wrong.
func TestLoadRefusesNamingWhatIsWrong(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "g.py", "graph = None\n")
	cases := map[string]struct{ body, want string }{
		"auth":           {`{"graphs": {"a": "./g.py:graph"}, "auth": {"path": "./auth.py:a"}}`, `key "auth" is not supported by baton yet`},
		"http":           {`{"graphs": {"a": "./g.py:graph"}, "http": {}}`, `key "http" is not supported`},
		"ui":             {`{"graphs": {"a": "./g.py:graph"}, "ui": {}}`, `key "ui" is not supported`},
		"store":          {`{"graphs": {"a": "./g.py:graph"}, "store": {"index": {}}}`, `key "store" is not supported`},
		"not json":       {`{"graphs": `, `is not a JSON object`},
		"no graphs":      {`{"env": {}}`, `no graphs`},
		"missing file":   {`{"graphs": {"a": "./nope.py:graph"}}`, `graph "a": no file ` + filepath.Join(dir, "nope.py")},
		"no attribute":   {`{"graphs": {"a": "./g.py"}}`, `graph "a": "./g.py" is not "./file.py:attr"`},
		"module path":    {`{"graphs": {"a": "pkg.mod:graph"}}`, `module paths are not supported yet`},
		"bad id":         {`{"graphs": {"a b": "./g.py:graph"}}`, `graph id "a b"`},
		"env file":       {`{"graphs": {"a": "./g.py:graph"}, "env": ".nope"}`, `env: open`},
		"bad env":        {`{"graphs": {"a": "./g.py:graph"}, "env": 3}`, `env: want a file path or an object`},
		"bad dependency": {`{"graphs": {"a": "./g.py:graph"}, "dependencies": "."}`, `dependencies: want a list`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Load(write(t, dir, "langgraph.json", c.body))
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrConfig with %q", err, c.want)
			}
		})
	}
	if _, err := Load(filepath.Join(dir, "absent.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}

// A graph may be {"path": ...}, and the keys that only shape LangGraph's
// image build are read and ignored.
func TestLoadTakesPathObjectsAndIgnoresBuildKeys(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "g.mts", "export const graph = null;\n")
	write(t, dir, ".env", "# comment\nexport A=1\nB='two words'\n\nC=\"3\"\n")
	p, err := Load(write(t, dir, "langgraph.json", `{"graphs": {"g": {"path": "./g.mts:graph", "description": "x"}},
		"env": ".env", "node_version": "20", "dockerfile_lines": [], "$schema": "x"}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.Graphs["g"].Lang != "js" {
		t.Errorf("g: %+v", p.Graphs["g"])
	}
	if p.Env["A"] != "1" || p.Env["B"] != "two words" || p.Env["C"] != "3" {
		t.Errorf("env: %v", p.Env)
	}
	// A JS graph needs the JS worker: New says where it looked.
	if _, err := New(p, Options{RedisURL: "redis://x"}); err == nil || !strings.Contains(err.Error(), `graph "g" is JavaScript`) {
		t.Errorf("New with a JS graph and no JS worker: %v", err)
	}
}
