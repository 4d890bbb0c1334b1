package lua

import (
	"strings"
	"testing"
)

// Every script expands to what Redis runs, with no include line left; the
// scripts that take a caller's lease all share the one fence check.
func TestSourceExpandsIncludes(t *testing.T) {
	t.Parallel()
	lib, err := FS.ReadFile("lib/fence_check.lua")
	if err != nil {
		t.Fatal(err)
	}
	fenced := map[string]bool{"heartbeat": true, "commit": true, "fail": true, "release": true,
		"checkpoint": true, "checkpoint_writes": true, "checkpoint_delete": true, "park": true, "packed_fence": true, "stream_append": true}
	for _, name := range Names() {
		src, err := Source(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if strings.Contains(src, includeMark) {
			t.Errorf("%s: an include line is left", name)
		}
		if got := strings.Contains(src, string(lib)); got != fenced[name] {
			t.Errorf("%s: includes the fence check: %v, want %v", name, got, fenced[name])
		}
		body := src[strings.Index(src, "]]"):] // past the header, which may name the event
		if fenced[name] && strings.Count(body, "'stale_rejected'") != strings.Count(string(lib), "'stale_rejected'") {
			t.Errorf("%s: writes stale_rejected itself instead of through the fence check", name)
		}
		delete(fenced, name)
	}
	if len(fenced) > 0 {
		t.Errorf("scripts missing: %v", fenced)
	}
	if _, err := Source("nope"); err == nil {
		t.Error("an unknown script has no source")
	}
}
