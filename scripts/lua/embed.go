// Package lua ships baton's Redis scripts. Each file is one atomic operation
// of the ownership protocol; its header documents KEYS, ARGV and every return
// shape, and package fence binds it.
package lua

import "embed"

// FS holds every script, by file name ("claim.lua", ...).
//
//go:embed *.lua
var FS embed.FS
