package agentapi_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// openapiRoute finds the routes each group registers on the mux.
var openapiRoute = regexp.MustCompile(`\.Handle(?:Func)?\(\s*"([A-Z]+) (/[^"]*)"`)

// openapiParam normalises a path's parameters: the document and the mux may
// name them differently.
var openapiParam = regexp.MustCompile(`\{[^}]*\}`)

// Every route the package serves is in its OpenAPI document (GET /docs),
// with its method; the document names nothing the mux does not know how to
// parse.
func TestOpenAPIHasEveryRoute(t *testing.T) {
	t.Parallel()
	var doc struct {
		OpenAPI string                               `json:"openapi"`
		Paths   map[string]map[string]map[string]any `json:"paths"`
	}
	raw, err := os.ReadFile("openapi.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &doc))
	require.NotEmpty(t, doc.OpenAPI)
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			documented[strings.ToUpper(method)+" "+openapiParam.ReplaceAllString(path, "{}")] = true
		}
	}
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	served := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range openapiRoute.FindAllStringSubmatch(string(src), -1) {
			served++
			route := m[1] + " " + openapiParam.ReplaceAllString(m[2], "{}")
			assert.True(t, documented[route], "%s serves %s %s, which openapi.json does not document", f, m[1], m[2])
		}
	}
	assert.Greater(t, served, 20, "the routes were found in the source")
}
