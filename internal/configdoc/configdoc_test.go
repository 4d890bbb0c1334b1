package configdoc_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/configdoc"
)

// docs/configuration.md is what the configuration structs say today: a
// variable added, removed, renamed or redocumented in the code without
// `go generate ./internal/configdoc` fails here.
func TestCurrent(t *testing.T) {
	root, err := configdoc.Root()
	require.NoError(t, err)
	want, err := configdoc.Page(root)
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(root, "docs", "configuration.md"))
	require.NoError(t, err)
	if string(got) != string(want) {
		t.Fatalf("docs/configuration.md disagrees with the configuration structs: run go generate ./internal/configdoc")
	}
}

// Every variable gets a row with a meaning, and a field without a doc
// comment shares the row before (REDIS_USERNAME and REDIS_PASSWORD).
func TestRows(t *testing.T) {
	root, err := configdoc.Root()
	require.NoError(t, err)
	rows, err := configdoc.Rows(root, configdoc.Binaries[0])
	require.NoError(t, err)
	byVar := map[string]configdoc.Row{}
	for _, r := range rows {
		require.NotEmpty(t, r.Meaning, r.Vars)
		for _, v := range r.Vars {
			byVar[v] = r
		}
	}
	require.Equal(t, "`30s`", byVar["LEASE_TTL"].Default)
	require.Equal(t, []string{"REDIS_USERNAME", "REDIS_PASSWORD"}, byVar["REDIS_PASSWORD"].Vars)
	require.True(t, strings.HasPrefix(byVar["CONCURRENCY"].Meaning, "How many nodes"), byVar["CONCURRENCY"].Meaning)
}
