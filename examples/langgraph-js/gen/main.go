// Command gen copies the scripts BatonSaver calls from scripts/lua into
// examples/langgraph-js/lua, expanded exactly as Redis runs them
// (lua.Source), so the npm package ships them and never edits them by hand.
// TestGeneratedLuaIsSource fails when a copy differs from its source.
//
//	go run ./examples/langgraph-js/gen   # from the repository root
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/batonrun/baton/scripts/lua"
)

//go:generate go run .

// scripts are the operations BatonSaver runs: a checkpoint (put), a task's
// pending writes (putWrites), and deleting a thread's checkpoints
// (deleteThread, mode lease).
var scripts = []string{"checkpoint", "checkpoint_writes", "checkpoint_delete"}

func main() {
	if err := write(outDir()); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

// outDir is examples/langgraph-js/lua, found from this file's place, so the
// command works from any working directory.
func outDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "lua")
}

func write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, name := range scripts {
		src, err := lua.Source(name)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name+".lua"), []byte(src), 0o644); err != nil {
			return err
		}
	}
	return nil
}
