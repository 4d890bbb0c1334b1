package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// readmeAgent is the first ```js block of js/README.md:
// the agent the package's README leads with.
func readmeAgent(t *testing.T, pkg string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(pkg, "README.md"))
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(b), "```js\n")
	require.True(t, ok, "README.md has a ```js block")
	code, _, ok := strings.Cut(rest, "```")
	require.True(t, ok)
	return code
}

// npm runs npm in dir and returns its stdout.
func npm(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("npm", append(args, "--no-audit", "--no-fund", "--loglevel=error")...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Run(), "npm %v in %s: %s", args, dir, errb.String())
	return out.String()
}

// The package installs the way a Node user installs one, into a fresh
// folder outside the repository: from a tarball made by npm pack, and from
// the folder itself (npm install --install-links PATH, which packs it).
// In each, the README's agent, copied as it is, runs as an exec node and
// its run succeeds with the graph's state as the result.
func TestLangGraphPackageInstallsAndRunsTheReadmeAgent(t *testing.T) {
	t.Parallel()
	pkg := lgPackage(t)
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm is not installed")
	}
	agent := readmeAgent(t, pkg)
	tmp := t.TempDir()
	packed := filepath.Join(tmp, "packed")
	require.NoError(t, os.Mkdir(packed, 0o755))
	lines := strings.Fields(npm(t, pkg, "pack", "--pack-destination", packed))
	tarball := filepath.Join(packed, lines[len(lines)-1])

	c := newCluster(t)
	c.startRunner("lg-install", lgEnv)
	for _, how := range []struct{ name, arg string }{
		{"tarball", tarball},
		{"folder", "--install-links=" + pkg},
	} {
		dir := filepath.Join(tmp, how.name)
		require.NoError(t, os.Mkdir(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "package.json"),
			[]byte(`{"name":"my-agent","private":true,"type":"module"}`), 0o644))
		args := []string{"install"}
		if arg, ok := strings.CutPrefix(how.arg, "--install-links="); ok {
			args = append(args, "--install-links", arg)
		} else {
			args = append(args, how.arg)
		}
		npm(t, dir, args...)
		fi, err := os.Lstat(filepath.Join(dir, "node_modules", "@baton", "langgraph-saver"))
		require.NoError(t, err)
		require.True(t, fi.IsDir(), "%s: installed as a copy, not a link into the repository", how.name)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "agent.mjs"), []byte(agent), 0o644))

		input, _ := json.Marshal(map[string]any{"command": []string{"node", "agent.mjs"}, "dir": dir,
			"env": map[string]string{"QUESTION": "what is fencing? (" + how.name + ")"}})
		run := c.submit(`{"id":"lg-install-` + how.name + `","thread":"install-` + how.name +
			`","nodes":[{"id":"agent","kind":"exec","input":` + string(input) + `}]}`)
		start := time.Now()
		require.Equal(t, 0, c.watch(run), "%s: the README agent's run succeeds", how.name)
		st := c.status(run)
		var result map[string]any
		require.NoError(t, json.Unmarshal(st.node("agent").Result, &result), string(st.node("agent").Result))
		require.Equal(t, "what is fencing? ("+how.name+")", result["question"])
		require.NotEmpty(t, result["answer"])
		t.Logf("%s: run %s SUCCEEDED in %s with %s", how.name, run, time.Since(start).Round(time.Millisecond), st.node("agent").Result)
	}
}
