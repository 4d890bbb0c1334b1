package spec

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// legacyParseSpec is Parse as it was before parsing became strict:
// JSON through encoding/json, anything else (invalid JSON included)
// through YAML. Kept to show that what it accepted still means the same.
func legacyParseSpec(data []byte) (*Run, error) {
	data = bytes.TrimSpace(data)
	if data[0] != '{' || !json.Valid(data) {
		var v any
		if err := yaml.Unmarshal(data, &v); err != nil {
			return nil, err
		}
		j, err := json.Marshal(normalizeYAML(v))
		if err != nil {
			return nil, err
		}
		data = j
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s Run
	if err := dec.Decode(&s); err != nil {
		return nil, err
	}
	return &s, nil
}

// A spec the old parser accepted is stored exactly as before: the same
// nodes, inputs and defaults, and the same digest, so submitting it again
// after an upgrade is still a no-op instead of a conflict. Files named
// new-* are accepted only now.
func TestAcceptedSpecsKeepTheirDigest(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "specs", "ok", "*"))
	require.NoError(t, err)
	files = append(files, filepath.Join("..", "examples", "deploy", "run.json"))
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			now, err := ParseAs(data, FormatOf(f))
			require.NoError(t, err)
			require.NoError(t, now.Validate(Limits{}))
			if strings.HasPrefix(filepath.Base(f), "new-") {
				return
			}
			before, err := legacyParseSpec(data)
			require.NoError(t, err, "the old parser accepted it")
			require.NoError(t, before.Validate(Limits{}))
			wantNodes, wantDigest, err := before.compile(Limits{})
			require.NoError(t, err)
			gotNodes, gotDigest, err := now.compile(Limits{})
			require.NoError(t, err)
			require.Equal(t, wantNodes, gotNodes)
			require.Equal(t, wantDigest, gotDigest)
			require.Equal(t, before.ID, now.ID)
			require.Equal(t, before.Multitask, now.Multitask)
		})
	}
}
