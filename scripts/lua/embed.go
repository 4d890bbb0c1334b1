// Package lua ships baton's Redis scripts. Each file is one atomic operation
// of the ownership protocol; its header documents KEYS, ARGV and every return
// shape, and package fence binds it. Logic that must never differ between
// scripts (the fence check) lives once in lib/ and is included by a line
// "--@include name" that Source expands.
package lua

import (
	"bufio"
	"embed"
	"fmt"
	"strings"
)

// FS holds every script, by file name ("claim.lua", ...), and the included
// pieces under lib/.
//
//go:embed *.lua lib/*.lua
var FS embed.FS

const includeMark = "--@include "

// Source returns the script name ("claim") as Redis runs it: the file with
// each "--@include lib" line replaced by lib/lib.lua. Savers in other
// languages must send exactly this text (see examples/).
func Source(name string) (string, error) {
	src, err := FS.ReadFile(name + ".lua")
	if err != nil {
		return "", fmt.Errorf("lua: script %s: %w", name, err)
	}
	var out strings.Builder
	sc := bufio.NewScanner(strings.NewReader(string(src)))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if lib, ok := strings.CutPrefix(line, includeMark); ok {
			inc, err := FS.ReadFile("lib/" + strings.TrimSpace(lib) + ".lua")
			if err != nil {
				return "", fmt.Errorf("lua: script %s includes %q: %w", name, lib, err)
			}
			out.Write(inc)
			continue
		}
		out.WriteString(line)
		out.WriteByte('\n')
	}
	return out.String(), sc.Err()
}

// Names lists the scripts (not the included pieces), without ".lua".
func Names() []string {
	entries, _ := FS.ReadDir(".") // the embedded root always reads
	var out []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".lua"); ok && !e.IsDir() {
			out = append(out, name)
		}
	}
	return out
}
