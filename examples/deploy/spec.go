// Package deploy ships the examples' deploy DAG (run.json) inside the
// binary, so the demo and tests find it whatever their working directory.
package deploy

import _ "embed"

// RunJSON is run.json: build -> test -> migrate -> deploy -> notify, using
// only the stock kinds. Its http nodes call DownstreamURL.
//
//go:embed run.json
var RunJSON []byte

// DownstreamURL is where run.json's http nodes send their calls, and
// where examples/downstream listens by default.
const DownstreamURL = "http://127.0.0.1:8089"
