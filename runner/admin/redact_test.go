package admin

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The node view's input hides what the name heuristic used to miss: keys
// such as OPENAI_KEY, DB_PASS and DATABASE_URL, values that are not
// strings, a URL's password, and secrets in command arguments; what is no
// secret, and a reference, stays readable.
func TestRedactHidesSecretShapes(t *testing.T) {
	t.Parallel()
	in := `{"command": ["psql", "--password=hunter22", "-H", "Authorization: Bearer abc.def.ghi", "--verbose"],
		"env": {"OPENAI_KEY": "sk-1", "DB_PASS": "pw-2", "PIN_TOKEN": 1234, "DATABASE_URL": "postgres://app:pw-3@db:5432/x",
		"MODE": "fast", "REF": {"$env": "OPENAI_API_KEY"}, "HOME_URL": "https://example.com/a"}}`
	var got map[string]any
	require.NoError(t, json.Unmarshal(redact(json.RawMessage(in)), &got))
	env := got["env"].(map[string]any)
	assert.Equal(t, redacted, env["OPENAI_KEY"])
	assert.Equal(t, redacted, env["DB_PASS"])
	assert.Equal(t, redacted, env["PIN_TOKEN"])
	assert.Equal(t, "postgres://app:[redacted]@db:5432/x", env["DATABASE_URL"])
	assert.Equal(t, "fast", env["MODE"])
	assert.Equal(t, map[string]any{"$env": "OPENAI_API_KEY"}, env["REF"])
	assert.Equal(t, "https://example.com/a", env["HOME_URL"])
	assert.Equal(t, []any{"psql", "--password=[redacted]", "-H", "Authorization: Bearer [redacted]", "--verbose"}, got["command"])
}
