// Command gen copies the scripts the LangGraph savers call from scripts/lua
// into js/lua (the npm package) and
// python/baton_langgraph/lua (the Python package), expanded
// exactly as Redis runs them (lua.Source), so both packages ship them and
// nobody edits them by hand. TestGeneratedLuaIsSource fails when a copy
// differs from its source.
//
//	go run ./js/gen   # from the repository root: both copies
//	go run ./js/gen -out DIR   # only into DIR
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/batonrun/baton/scripts/lua"
)

//go:generate go run .

// scripts are the operations both BatonSavers run: a checkpoint (put), a task's
// pending writes (putWrites), and deleting a thread's checkpoints
// (deleteThread, mode lease); and the item store (BatonStore: put, get,
// the index of namespaces).
var scripts = []string{"checkpoint", "checkpoint_writes", "checkpoint_delete",
	"store_put", "store_get", "store_index", "store_unindex"}

func main() {
	out := flag.String("out", "", "write the scripts only into this folder (default: both packages)")
	flag.Parse()
	dirs := outDirs()
	if *out != "" {
		dirs = []string{*out}
	}
	for _, dir := range dirs {
		if err := write(dir); err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
	}
}

// outDirs are the packages' script folders, js/lua and
// python/baton_langgraph/lua, found from this file's place,
// so the command works from any working directory.
func outDirs() []string {
	return []string{
		filepath.Join(repoDir(), "js", "lua"),
		filepath.Join(repoDir(), "python", "baton_langgraph", "lua"),
	}
}

// repoDir is the repository's root folder.
func repoDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
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
