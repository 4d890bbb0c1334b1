// Package bintest builds the project's commands once per test binary, so
// that tests run them as real processes, the way scripts and operators do.
package bintest

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// Main builds pkgs (import paths, or "." for the package under test) into a
// temporary directory, hands it to built, runs the tests, removes the
// directory and exits with the tests' code. Call it from TestMain.
func Main(m *testing.M, built func(dir string), pkgs ...string) {
	dir, err := os.MkdirTemp("", "baton-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bintest:", err)
		os.Exit(1)
	}
	args := append([]string{"build", "-o", dir + string(os.PathSeparator)}, pkgs...)
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "bintest: go build %v: %v\n%s", pkgs, err, out)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	built(dir)
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
