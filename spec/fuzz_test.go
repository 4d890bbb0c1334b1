package spec_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/spec"
)

// FuzzParseSpec: whatever a client sends, parsing and validation return
// (no panic, no hang); an error is made of at most 21 *SpecErrors, is
// small and never names a Go type; an accepted spec, written back as
// JSON, reads back as the same spec and validates again.
//
// The seeds are the specs in testdata/specs, so go test runs them all;
// go test -fuzz FuzzParseSpec ./runner explores from there.
func FuzzParseSpec(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "specs", "*", "*"))
	require.NoError(f, err)
	for _, p := range files {
		if strings.HasSuffix(p, ".err") {
			continue
		}
		data, err := os.ReadFile(p)
		require.NoError(f, err)
		f.Add(data, uint8(spec.FormatOf(p)))
	}
	f.Add([]byte("nodes: [&n {id: a, kind: noop, deps: &d [a, a]}, {<<: *n, id: b, deps: *d}]"), uint8(spec.YAML))
	f.Add([]byte(`{"nodes":[{"id":"a","kind":"noop","timeout":-1e308,"max_attempts":2147483648}]}`), uint8(spec.Auto))

	f.Fuzz(func(t *testing.T, data []byte, format uint8) {
		s, err := spec.ParseAs(data, spec.Format(format%3))
		if err != nil {
			checkSpecError(t, err)
			return
		}
		if err := s.Validate(spec.Limits{}); err != nil {
			checkSpecError(t, err)
			return
		}
		j, err := json.Marshal(s)
		require.NoError(t, err)
		back, err := spec.ParseAs(j, spec.JSON)
		require.NoError(t, err, "%s", j)
		require.NoError(t, back.Validate(spec.Limits{}), "%s", j)
		require.Equal(t, []string{s.ID, s.Thread, s.Multitask}, []string{back.ID, back.Thread, back.Multitask})
		require.Len(t, back.Nodes, len(s.Nodes))
		for i, n := range s.Nodes {
			b := back.Nodes[i]
			require.Equal(t, []string{n.ID, n.Kind, n.Queue}, []string{b.ID, b.Kind, b.Queue})
			require.Equal(t, len(n.Deps), len(b.Deps))
			if len(n.Deps) > 0 {
				require.Equal(t, n.Deps, b.Deps)
			}
			require.Equal(t, n.MaxAttempts, b.MaxAttempts)
			require.Equal(t, n.Timeout, b.Timeout)
			require.Equal(t, jsonValue(t, n.Input), jsonValue(t, b.Input))
		}
	})
}

// checkSpecError holds an error to what a user of the CLI or the API sees.
func checkSpecError(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, spec.ErrInvalid)
	leaves := unjoin(err)
	require.LessOrEqual(t, len(leaves), 21)
	for _, e := range leaves {
		var se *spec.Error
		require.True(t, errors.As(e, &se), "%v is not a *Error", e)
		require.NotEmpty(t, se.Field)
	}
	msg := err.Error()
	require.Less(t, len(msg), 16<<10, "a bounded error")
	require.NotRegexp(t, goTypeName, msg)
	require.NotRegexp(t, schemaInternals, msg)
}

// schemaInternals matches what the schema library says in its own words:
// its name, schema URLs and keyword locations, which mean nothing to
// someone writing a spec (every rule of the schema has words: TestSchemaHasWords).
var schemaInternals = regexp.MustCompile(`jsonschema|file://|run\.schema\.json|#/|please report|validation failed`)

// jsonValue decodes an input for comparison, numbers as written.
func jsonValue(t *testing.T, raw json.RawMessage) any {
	t.Helper()
	if len(raw) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v))
	return v
}
