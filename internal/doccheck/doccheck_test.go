package doccheck

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// root is the module's root, where the README is: go test runs in the
// package's directory.
const root = "../.."

// maxReadmeLines is the README's budget: a front door of about 250 lines,
// with some slack before this test fails.
const maxReadmeLines = 300

// pending are pages that other changes are writing. Links to them are
// allowed before they exist; once they exist they are checked like any
// other page.
var pending = map[string]bool{
	"docs/langgraph-js.md":     true,
	"docs/langgraph-python.md": true,
}

// The README stays a front door; the manual lives in docs/.
func TestReadmeIsAFrontDoor(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	lines := bytes.Count(b, []byte("\n"))
	require.LessOrEqual(t, lines, maxReadmeLines,
		"README.md has %d lines; move the detail into a page under docs/ and link it", lines)
	for _, cmd := range []string{"make demo", "make test"} {
		require.Contains(t, string(b), cmd, "the README's quickstart names %q", cmd)
	}
	require.Contains(t, string(b), "(docs/README.md)", "the README links the manual's index")
}

// Every relative link in the README, the manual and the examples' index
// points at a file that exists, and every #anchor at a heading it has.
func TestRelativeLinksResolve(t *testing.T) {
	t.Parallel()
	files := markdownFiles(t)
	anchors := newAnchorCache()
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			t.Parallel()
			for _, l := range links(t, f) {
				target, frag, _ := strings.Cut(l.target, "#")
				path := f
				if target != "" {
					path = filepath.ToSlash(filepath.Join(filepath.Dir(f), target))
				}
				if _, err := os.Stat(filepath.Join(root, path)); err != nil {
					if pending[path] {
						t.Logf("%s:%d: %s is not written yet (pending)", f, l.line, path)
						continue
					}
					t.Errorf("%s:%d: link %q: %s does not exist", f, l.line, l.target, path)
					continue
				}
				if frag == "" || !strings.HasSuffix(path, ".md") {
					continue
				}
				if !anchors.of(t, path)[frag] {
					t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s", f, l.line, l.target, path, frag)
				}
			}
		})
	}
}

// examples/README.md lists every folder under examples/.
func TestExamplesIndexListsEveryFolder(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(root, "examples", "README.md"))
	require.NoError(t, err)
	entries, err := os.ReadDir(filepath.Join(root, "examples"))
	require.NoError(t, err)
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if !bytes.Contains(b, []byte("]("+e.Name()+")")) && !bytes.Contains(b, []byte("]("+e.Name()+"/")) {
			t.Errorf("examples/README.md does not link examples/%s/", e.Name())
		}
	}
}

// Every environment variable the binaries read (caarlos0/env `env:"..."`
// tags in cmd/runner and cmd/enqueue, nested configuration structs
// included) is named in docs/configuration.md.
func TestEveryEnvironmentVariableIsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join(root, "docs", "configuration.md"))
	require.NoError(t, err)
	r := newTagReader(t)
	vars := map[string]string{}
	for _, dir := range []string{"cmd/runner", "cmd/enqueue"} {
		r.packageVars(dir, vars)
	}
	for _, must := range []string{"REDIS_URL", "LEASE_TTL", "BATON_PREFIX"} {
		require.Contains(t, vars, must, "the tag reader lost its way: %s not found", must)
	}
	names := make([]string, 0, len(vars))
	for v := range vars {
		names = append(names, v)
	}
	sort.Strings(names)
	for _, v := range names {
		if !bytes.Contains(doc, []byte("`"+v+"`")) {
			t.Errorf("%s (read by %s) is not documented in docs/configuration.md", v, vars[v])
		}
	}
}

// markdownFiles are the files whose links are checked, relative to root.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	files := []string{"README.md", "examples/README.md"}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		require.NoError(t, err)
		files = append(files, filepath.ToSlash(rel))
	}
	return files
}

type link struct {
	target string
	line   int
}

var (
	inlineLink = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refDef     = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	scheme     = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
)

// links returns the relative link targets of a Markdown file, outside
// code blocks and code spans.
func links(t *testing.T, file string) []link {
	t.Helper()
	var out []link
	eachLine(t, file, func(n int, line string) {
		line = codeSpan.ReplaceAllString(line, "")
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
		if m := refDef.FindStringSubmatch(line); m != nil {
			targets = append(targets, m[1])
		}
		for _, tg := range targets {
			if scheme.MatchString(tg) || strings.HasPrefix(tg, "//") {
				continue
			}
			out = append(out, link{target: tg, line: n})
		}
	})
	return out
}

// eachLine calls fn with every line of file outside fenced code blocks.
func eachLine(t *testing.T, file string, fn func(n int, line string)) {
	t.Helper()
	f, err := os.Open(filepath.Join(root, file))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	fence := ""
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		if fence == "" {
			if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
				fence = trimmed[:3]
				continue
			}
		} else {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		fn(n, line)
	}
	require.NoError(t, sc.Err())
}

// anchorCache computes each file's anchors once.
type anchorCache struct {
	mu    sync.Mutex
	files map[string]map[string]bool
}

func newAnchorCache() *anchorCache {
	return &anchorCache{files: map[string]map[string]bool{}}
}

var (
	atxHeading = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	mdLink     = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

func (c *anchorCache) of(t *testing.T, file string) map[string]bool {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if a, ok := c.files[file]; ok {
		return a
	}
	a := map[string]bool{}
	seen := map[string]int{}
	eachLine(t, file, func(_ int, line string) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			a[m[1]] = true
		}
		m := atxHeading.FindStringSubmatch(line)
		if m == nil {
			return
		}
		slug := slugify(m[2])
		if k := seen[slug]; k > 0 {
			a[fmt.Sprintf("%s-%d", slug, k)] = true
		} else {
			a[slug] = true
		}
		seen[slug]++
	})
	c.files[file] = a
	return a
}

// slugify is GitHub's anchor for a heading: its text without markup,
// lower case, punctuation other than - and _ removed, each space a -.
func slugify(heading string) string {
	heading = mdLink.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestSlugify(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"exec: `::checkpoint` lines and `BATON_CHECKPOINT_FILE`": "exec-checkpoint-lines-and-baton_checkpoint_file",
		"1 master versus 3 (Redis Cluster)":                      "1-master-versus-3-redis-cluster",
		"Redis Cluster, Sentinel and failover":                   "redis-cluster-sentinel-and-failover",
		"Your own kinds (Go)":                                    "your-own-kinds-go",
		"The [fault model](fault-model.md), **checked**":         "the-fault-model-checked",
	} {
		require.Equal(t, want, slugify(in), in)
	}
}

// tagReader finds the env tags of a package's structs, following fields
// of struct types declared in the same module (caarlos0/env reads nested
// structs, with an envPrefix when one is given).
type tagReader struct {
	t      *testing.T
	module string
	fset   *token.FileSet
	pkgs   map[string]*goPackage
}

type goPackage struct {
	types   map[string]*ast.StructType
	imports map[string]map[string]string // file -> local name -> import path
	typeIn  map[string]string            // type name -> file it is declared in
}

func newTagReader(t *testing.T) *tagReader {
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^module\s+(\S+)`).FindSubmatch(mod)
	require.NotNil(t, m)
	return &tagReader{t: t, module: string(m[1]), fset: token.NewFileSet(), pkgs: map[string]*goPackage{}}
}

// load parses the non-test Go files of dir (relative to root).
func (r *tagReader) load(dir string) *goPackage {
	if p, ok := r.pkgs[dir]; ok {
		return p
	}
	p := &goPackage{types: map[string]*ast.StructType{}, imports: map[string]map[string]string{}, typeIn: map[string]string{}}
	r.pkgs[dir] = p
	files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
	require.NoError(r.t, err)
	require.NotEmpty(r.t, files, "no Go files in %s", dir)
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(r.fset, name, nil, parser.SkipObjectResolution)
		require.NoError(r.t, err)
		imps := map[string]string{}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			local := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				local = imp.Name.Name
			}
			imps[local] = path
		}
		p.imports[name] = imps
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if st, ok := ts.Type.(*ast.StructType); ok {
					p.types[ts.Name.Name] = st
					p.typeIn[ts.Name.Name] = name
				}
			}
			return true
		})
	}
	return p
}

// packageVars adds the variables of every struct in dir that has an env
// tag, each with where it is declared.
func (r *tagReader) packageVars(dir string, vars map[string]string) {
	p := r.load(dir)
	for name, st := range p.types {
		if r.hasEnvTag(st) {
			r.structVars(dir, p, p.typeIn[name], st, "", vars)
		}
	}
}

func (r *tagReader) hasEnvTag(st *ast.StructType) bool {
	for _, f := range st.Fields.List {
		if _, ok := tag(f, "env"); ok {
			return true
		}
	}
	return false
}

func (r *tagReader) structVars(dir string, p *goPackage, file string, st *ast.StructType, prefix string, vars map[string]string) {
	for _, f := range st.Fields.List {
		if name, ok := tag(f, "env"); ok {
			name, _, _ = strings.Cut(name, ",")
			if name != "" && name != "-" {
				vars[prefix+name] = filepath.ToSlash(dir)
			}
			continue
		}
		ndir, np, nfile, nst := r.resolve(dir, p, file, f.Type)
		if nst == nil {
			continue
		}
		pre, _ := tag(f, "envPrefix")
		r.structVars(ndir, np, nfile, nst, prefix+pre, vars)
	}
}

// resolve finds the struct a field's type names, in the same package or
// in another package of the module.
func (r *tagReader) resolve(dir string, p *goPackage, file string, typ ast.Expr) (string, *goPackage, string, *ast.StructType) {
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	switch x := typ.(type) {
	case *ast.Ident:
		if st := p.types[x.Name]; st != nil {
			return dir, p, p.typeIn[x.Name], st
		}
	case *ast.StructType:
		return dir, p, file, x
	case *ast.SelectorExpr:
		pkg, ok := x.X.(*ast.Ident)
		if !ok {
			break
		}
		path := p.imports[file][pkg.Name]
		rel, ok := strings.CutPrefix(path, r.module+"/")
		if !ok {
			break
		}
		np := r.load(rel)
		if st := np.types[x.Sel.Name]; st != nil {
			return rel, np, np.typeIn[x.Sel.Name], st
		}
	}
	return "", nil, "", nil
}

func tag(f *ast.Field, key string) (string, bool) {
	if f.Tag == nil {
		return "", false
	}
	s, err := strconv.Unquote(f.Tag.Value)
	if err != nil {
		return "", false
	}
	return reflect.StructTag(s).Lookup(key)
}
