package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The README's LANGGRAPH_PYTHON=.venv/bin/python means the runner's
// folder, not the project's, where the graph worker starts.
func TestRelativeInterpreterIsTheRunnersFolders(t *testing.T) {
	wd, err := os.Getwd()
	assert.NoError(t, err)
	assert.Equal(t, filepath.Join(wd, ".venv/bin/python"), absIfPath(".venv/bin/python"))
	assert.Equal(t, "python3", absIfPath("python3"), "a bare name is looked up in PATH")
	assert.Equal(t, "/usr/bin/node", absIfPath("/usr/bin/node"))
}
