package spec

import (
	_ "embed"
	"slices"
)

// schemaJSON is the run spec's JSON Schema (2020-12): what an editor, a
// linter or another language can check a spec against before submitting
// it. The admin server serves it at /v1/schemas/run.json.
//
// The parser, not the schema, decides: it reports every problem with its
// line and column and makes the checks a schema cannot express (dependency
// references and cycles, duplicate node ids and keys, input sizes,
// durations too large to represent). TestSchemaAgreesWithParser runs every
// spec of testdata/specs and the examples through both and fails when they
// disagree on accepting one, so the two cannot drift apart.
//
//go:embed run.schema.json
var schemaJSON []byte

// Schema returns the run spec's JSON Schema (a copy).
func Schema() []byte { return slices.Clone(schemaJSON) }
