package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/batonrun/baton/scripts/lua"
)

// The scripts the npm package ships are byte for byte what Redis runs for
// baton itself: the saver and the Go store are fenced by one text.
func TestGeneratedLuaIsSource(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir(outDir())
	if err != nil {
		t.Fatal(err)
	}
	var shipped []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".lua"); ok {
			shipped = append(shipped, name)
		}
	}
	if !slices.Equal(slices.Sorted(slices.Values(shipped)), slices.Sorted(slices.Values(scripts))) {
		t.Errorf("examples/langgraph-js/lua holds %v, want %v", shipped, scripts)
	}
	for _, name := range scripts {
		want, err := lua.Source(name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(outDir(), name+".lua"))
		if err != nil {
			t.Fatalf("%v (run: go run ./examples/langgraph-js/gen)", err)
		}
		if string(got) != want {
			t.Errorf("examples/langgraph-js/lua/%s.lua differs from scripts/lua/%s.lua as expanded: "+
				"run go run ./examples/langgraph-js/gen, never edit the copy", name, name)
		}
	}
}
