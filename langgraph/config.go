package langgraph

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// ErrConfig is wrapped by every refusal of a langgraph.json.
var ErrConfig = errors.New("langgraph: config")

// Project is a LangGraph project as its langgraph.json describes it, the
// file LangGraph's CLI reads.
type Project struct {
	// Path is the langgraph.json's absolute path; Dir its folder, which the
	// graphs' paths are relative to.
	Path, Dir string
	// Graphs are the project's graphs by id.
	Graphs map[string]Graph
	// Env is what the project's env gives its graphs (a file's variables,
	// or the map); the worker process gets them on top of the runner's.
	Env map[string]string
	// Dependencies are read and kept, never installed: the interpreter
	// named by LANGGRAPH_PYTHON must have them.
	Dependencies []string
}

// Graph is one entry of graphs: "./path.py:attr".
type Graph struct {
	ID string
	// File is the absolute path of the graph's module; Attr the attribute
	// that holds the compiled graph or a function returning one.
	File, Attr string
	// Lang is "python" or "js", by the file's extension.
	Lang string
}

// Ref is the graph as the worker imports it: "/abs/file.py:attr".
func (g Graph) Ref() string { return g.File + ":" + g.Attr }

// served are the keys of langgraph.json baton reads; ignored are those
// that only say how LangGraph's CLI builds an image, which a runner that
// uses the interpreter it is given has no use for. Every other key is
// refused, naming it: a project that declares auth expects its threads kept
// apart per user, and serving it without that would expose them.
var (
	served  = []string{"graphs", "env", "dependencies"}
	ignored = []string{"$schema", "python_version", "node_version", "pip_config_file", "pip_installer",
		"dockerfile_lines", "image_distro", "base_image", "keep_pkg_tools", "api_version", "description"}
)

var graphIDRe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)

// Load reads a langgraph.json. It refuses a missing or invalid file, a key
// baton does not serve yet, a graph whose path is not "./file.ext:attr" or
// whose file is missing, and an env file it cannot read. It does not import
// the graphs: the worker does, at its start.
func Load(path string) (*Project, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	b, err := os.ReadFile(abs)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%w: %s is not a JSON object: %w", ErrConfig, abs, err)
	}
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		if !slices.Contains(served, k) && !slices.Contains(ignored, k) {
			return nil, fmt.Errorf("%w: %s: key %q is not supported by baton yet (supported: %s); "+
				"remove it to run this project on baton", ErrConfig, abs, k, strings.Join(served, ", "))
		}
	}
	p := &Project{Path: abs, Dir: filepath.Dir(abs), Graphs: map[string]Graph{}, Env: map[string]string{}}
	if err := p.readGraphs(raw["graphs"]); err != nil {
		return nil, err
	}
	if err := p.readEnv(raw["env"]); err != nil {
		return nil, err
	}
	if d, ok := raw["dependencies"]; ok {
		if err := json.Unmarshal(d, &p.Dependencies); err != nil {
			return nil, fmt.Errorf("%w: %s: dependencies: want a list of strings: %w", ErrConfig, abs, err)
		}
	}
	return p, nil
}

func (p *Project) readGraphs(raw json.RawMessage) error {
	var graphs map[string]json.RawMessage
	if len(raw) == 0 {
		return fmt.Errorf("%w: %s: no graphs", ErrConfig, p.Path)
	}
	if err := json.Unmarshal(raw, &graphs); err != nil || len(graphs) == 0 {
		return fmt.Errorf("%w: %s: graphs: want an object of id -> \"./file.py:attr\"", ErrConfig, p.Path)
	}
	for id, v := range graphs {
		if !graphIDRe.MatchString(id) {
			return fmt.Errorf("%w: %s: graph id %q: want [A-Za-z0-9._-], at most 128 bytes", ErrConfig, p.Path, id)
		}
		var ref string
		if err := json.Unmarshal(v, &ref); err != nil {
			// LangGraph also takes {"path": "./file.py:attr", "description": ...}.
			var obj struct {
				Path string `json:"path"`
			}
			if err := json.Unmarshal(v, &obj); err != nil || obj.Path == "" {
				return fmt.Errorf("%w: %s: graph %q: want \"./file.py:attr\" or {\"path\": ...}", ErrConfig, p.Path, id)
			}
			ref = obj.Path
		}
		g, err := p.graph(id, ref)
		if err != nil {
			return err
		}
		p.Graphs[id] = g
	}
	return nil
}

func (p *Project) graph(id, ref string) (Graph, error) {
	i := strings.LastIndex(ref, ":")
	if i <= 0 || i == len(ref)-1 {
		return Graph{}, fmt.Errorf("%w: %s: graph %q: %q is not \"./file.py:attr\"", ErrConfig, p.Path, id, ref)
	}
	file, attr := ref[:i], ref[i+1:]
	if !filepath.IsAbs(file) {
		file = filepath.Join(p.Dir, file)
	}
	g := Graph{ID: id, File: file, Attr: attr}
	switch filepath.Ext(file) {
	case ".py":
		g.Lang = "python"
	case ".js", ".mjs", ".cjs", ".ts", ".mts", ".cts":
		g.Lang = "js"
	default:
		return Graph{}, fmt.Errorf("%w: %s: graph %q: %q: want a .py, .js, .mjs, .ts or .mts file "+
			"(module paths are not supported yet)", ErrConfig, p.Path, id, ref)
	}
	if st, err := os.Stat(file); err != nil || st.IsDir() {
		return Graph{}, fmt.Errorf("%w: %s: graph %q: no file %s", ErrConfig, p.Path, id, file)
	}
	return g, nil
}

func (p *Project) readEnv(raw json.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	var file string
	if err := json.Unmarshal(raw, &file); err == nil {
		if !filepath.IsAbs(file) {
			file = filepath.Join(p.Dir, file)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("%w: %s: env: %w", ErrConfig, p.Path, err)
		}
		p.Env, err = parseDotenv(b)
		if err != nil {
			return fmt.Errorf("%w: %s: env %s: %w", ErrConfig, p.Path, file, err)
		}
		return nil
	}
	if err := json.Unmarshal(raw, &p.Env); err != nil {
		return fmt.Errorf("%w: %s: env: want a file path or an object of strings", ErrConfig, p.Path)
	}
	return nil
}

// parseDotenv reads KEY=VALUE lines: blank lines and # comments skipped,
// an optional "export ", and a value in single or double quotes taken as
// written inside them.
func parseDotenv(b []byte) (map[string]string, error) {
	env := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("line %d is not KEY=VALUE", n)
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		env[k] = v
	}
	return env, sc.Err()
}
