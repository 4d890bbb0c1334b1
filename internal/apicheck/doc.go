// Package apicheck runs schemathesis, a property-based tester for OpenAPI
// documents (installed from PyPI with the hashes in requirements.lock), against
// a real runner binary and the document it serves at /v1/openapi.json: with
// a fixed budget of generated requests, valid and invalid, no answer may be
// a 5xx and none may break the document. `make test` installs the tool
// into .venv here and runs it; without python3 the test skips, or fails
// when BATON_REQUIRE_PYTHON is set.
package apicheck
