// Command gen writes docs/configuration.md (go generate ./internal/configdoc).
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/batonrun/baton/internal/configdoc"
)

func main() {
	root, err := configdoc.Root()
	if err == nil {
		var page []byte
		if page, err = configdoc.Page(root); err == nil {
			err = os.WriteFile(filepath.Join(root, "docs", "configuration.md"), page, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "configdoc:", err)
		os.Exit(1)
	}
}
