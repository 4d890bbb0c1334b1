// Package version reports the build's version, for every binary's
// --version and the runner's /v1 answers alike. It reads only the build
// info, so a binary that links no worker runtime (enqueue) reports the
// same words as one that does.
package version

import "runtime/debug"

// String is the build's version: the module version (a pseudo-version
// naming the commit when the build stamped one: go build -buildvcs=auto in
// a git checkout, as `make build` asks), else "(devel)" and the commit when
// recorded.
func String() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := bi.Main.Version
	if v != "" && v != "(devel)" {
		return v
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " " + s.Value[:12]
		}
	}
	return v
}
