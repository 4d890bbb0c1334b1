// Package spec is baton's run-spec language: a run as a user writes it, in
// JSON or YAML, parsed, validated and compiled into the form fence's
// submit script stores.
//
//	bytes --Parse/ParseAs--> *Run --Compile(Limits)--> Compiled{Nodes, Digest}
//	                                (Validate, then     (client converts each node
//	                                 defaults, digest)   with fence.NodeSpec(n))
//
// A document is judged by the run spec's JSON Schema (run.schema.json,
// served by the API and read by editors), with a JSON Schema library:
// what the schema accepts is what Parse accepts. Go adds only what a
// schema cannot express (schema.go says what). Every problem is reported
// at once, each an *Error naming its field (and line and column where the
// text has them), all matching ErrInvalid, in the schema's words; no Go
// type name reaches a message. A Run built in Go is checked by Validate,
// which makes the same checks on its fields (a test holds it to the
// schema), and Compile always validates first, so nothing unvalidated is
// stored.
//
// The package also holds what a spec means once stored: a node's retry
// policy and the delay it gives (RetryDelay), and the {"$dep": ...} input
// references a worker resolves (ResolveRefs), so that what a spec says and
// what a runner does are read in one place.
//
// spec imports no Redis, no Asynq and no other baton package but the id
// rule (fence/ids), and of libraries only YAML and the JSON Schema
// validator: an editor plugin, a linter or a test can use it alone, and
// its tests need no server. Above it sit package client, which submits
// what it compiles, and the worker runtime (package runner), which reads
// what it stored.
package spec
