package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/batonrun/baton/scripts/lua"
)

// The scripts the npm and Python packages ship are byte for byte what Redis
// runs for baton itself: the savers and the Go store are fenced by one text.
func TestGeneratedLuaIsSource(t *testing.T) {
	t.Parallel()
	for _, dir := range outDirs() {
		rel, err := filepath.Rel(repoDir(), dir)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatalf("%v (run: go run ./js/gen)", err)
		}
		var shipped []string
		for _, e := range entries {
			if name, ok := strings.CutSuffix(e.Name(), ".lua"); ok {
				shipped = append(shipped, name)
			}
		}
		if !slices.Equal(slices.Sorted(slices.Values(shipped)), slices.Sorted(slices.Values(scripts))) {
			t.Errorf("%s holds %v, want %v", rel, shipped, scripts)
		}
		for _, name := range scripts {
			want, err := lua.Source(name)
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(dir, name+".lua"))
			if err != nil {
				t.Fatalf("%v (run: go run ./js/gen)", err)
			}
			if string(got) != want {
				t.Errorf("%s/%s.lua differs from scripts/lua/%s.lua as expanded: "+
					"run go run ./js/gen, never edit the copy", rel, name, name)
			}
		}
	}
}
