package spec

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The published schema compiles with the validator's own metaschema check,
// and parses as the document problems are worded from.
func TestSchemaCompiles(t *testing.T) {
	_, err := compiledSchema()
	require.NoError(t, err)
	require.NotNil(t, schemaDoc())
}

// constraints are the keywords whose failure is worded by the schema
// object's errorMessage; a type's failure by its title (or the type).
var constraints = []string{"pattern", "enum", "const", "format", "minimum", "maximum", "exclusiveMinimum",
	"exclusiveMaximum", "multipleOf", "minLength", "maxLength", "minItems", "maxItems", "uniqueItems", "not"}

// Every rule of the schema has words of its own, so no problem ever reads
// as the validator's English with a schema location (checkSpecError holds
// every error of the fuzz corpus to that).
func TestSchemaHasWords(t *testing.T) {
	// quiet: under not or if, whose failures are never reported as such
	var walk func(v *value, at string, quiet bool)
	walk = func(v *value, at string, quiet bool) {
		switch v.kind {
		case vList:
			for i, e := range v.list {
				walk(e, at+"/"+strconv.Itoa(i), quiet)
			}
			return
		case vObject:
		default:
			return
		}
		for _, k := range constraints {
			if v.member(k) != nil && !quiet {
				require.NotEmpty(t, v.member("errorMessage").str(), "%s has %s but no errorMessage", at, k)
			}
		}
		if v.member("anyOf") != nil && !quiet {
			require.NotEmpty(t, v.member("title").str(), "%s has anyOf but no title to say what it wants", at)
		}
		for _, m := range v.members {
			if m.key == "enum" || m.key == "const" || m.key == "required" {
				continue
			}
			walk(m.val, at+"/"+m.key, quiet || m.key == "not" || m.key == "if")
		}
	}
	walk(schemaDoc(), "#", false)
}

// What a problem says comes from the schema: the title of what a field
// wants, the errorMessage of a rule, the properties an unknown key is
// matched against.
func TestProblemsAreInTheSchemasWords(t *testing.T) {
	node := schemaDoc().member("$defs").member("node").member("properties")
	for _, tc := range []struct{ spec, field, words string }{
		{`{"nodes": [{"id": "a", "kind": "noop", "deps": "b"}]}`, "nodes[0].deps", node.member("deps").member("title").str()},
		{`{"nodes": [{"id": "a", "kind": "noop", "max_attempts": 5000}]}`, "nodes[0].max_attempts", node.member("max_attempts").member("errorMessage").str()},
		{`{"thread": "t", "multitask": "queue", "nodes": [{"id": "a", "kind": "noop"}]}`, "multitask",
			schemaDoc().member("properties").member("multitask").member("errorMessage").str()},
		{`{"nodes": [{"id": "a", "kind": "noop", "retry": {"backoff": "linear"}}]}`, "nodes[0].retry.backoff",
			node.member("retry").member("properties").member("backoff").member("errorMessage").str()},
		{`{"nodes": [{"id": "a", "kind": "noop", "limits": [7]}]}`, "nodes[0].limits[0]",
			node.member("limits").member("items").member("title").str()},
		{`{"multitask": "enqueue", "nodes": [{"id": "a", "kind": "noop"}]}`, "thread",
			schemaDoc().member("dependentSchemas").member("multitask").member("then").member("errorMessage").str()},
		{`{"start_at": "2030-01-02T03:04:05Z", "start_in": "5s", "nodes": [{"id": "a", "kind": "noop"}]}`, "start_in",
			"set start_at or start_in, not both"},
		{`{"nodes": [{"id": "a", "kind": "noop", "Retry": {}}]}`, "spec", `did you mean "retry"?`},
	} {
		require.NotEmpty(t, tc.words, tc.spec)
		_, err := Parse([]byte(tc.spec))
		require.ErrorContains(t, err, tc.field+": ", tc.spec)
		require.ErrorContains(t, err, tc.words, tc.spec)
		require.NotContains(t, strings.ToLower(err.Error()), "jsonschema", tc.spec)
	}
}
