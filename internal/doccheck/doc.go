// Package doccheck holds tests that keep the README and the manual in docs/
// honest as the code moves: the README stays a front door, every relative
// link and heading anchor resolves, every folder under examples/ is listed,
// and every environment variable the binaries read is documented in
// docs/configuration.md. It has no code of its own; `go test
// ./internal/doccheck/` runs the checks without Redis.
package doccheck
