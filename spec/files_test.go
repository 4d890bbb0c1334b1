package spec_test

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/spec"
)

var update = flag.Bool("update", false, "rewrite testdata/specs/bad/*.err with what the parser says now")

// checkFile reads a spec file as enqueue submit does: the format by its
// name, then Validate.
func checkFile(t *testing.T, path string) error {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	s, err := spec.ParseAs(data, spec.FormatOf(path))
	if err != nil {
		return err
	}
	return s.Validate(spec.Limits{})
}

// specFiles lists the specs of testdata/specs/dir, not their .err files.
func specFiles(t *testing.T, dir string) []string {
	t.Helper()
	all, err := filepath.Glob(filepath.Join("testdata", "specs", dir, "*"))
	require.NoError(t, err)
	var out []string
	for _, f := range all {
		if !strings.HasSuffix(f, ".err") {
			out = append(out, f)
		}
	}
	require.NotEmpty(t, out)
	return out
}

// Specs users have written stay accepted: the README's, the example's,
// and the ways of writing them (YAML anchors and merge keys, flow style,
// a byte order mark, nulls, CRLF).
func TestSpecFilesAccepted(t *testing.T) {
	t.Parallel()
	files := append(specFiles(t, "ok"), filepath.Join("..", "examples", "deploy", "run.json"))
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			require.NoError(t, checkFile(t, f))
		})
	}
}

// goTypeName matches what encoding/json's and yaml's errors say about Go
// types, which mean nothing to someone writing a spec.
var goTypeName = regexp.MustCompile(`Go (value|struct)|runner\.|interface ?\{\}|\bmap\[|\[\]string|of type`)

// Each refused spec gets the messages in its .err file: every problem,
// each naming its field (and line and column, where it has them), at most
// 20 listed. go test ./runner -run TestSpecFilesRefused -update rewrites
// them after a deliberate change.
func TestSpecFilesRefused(t *testing.T) {
	t.Parallel()
	for _, f := range specFiles(t, "bad") {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			err := checkFile(t, f)
			require.ErrorIs(t, err, spec.ErrInvalid)
			leaves := unjoin(err)
			require.LessOrEqual(t, len(leaves), 21, "20 problems and a count of the rest")
			for _, e := range leaves {
				var se *spec.Error
				require.True(t, errors.As(e, &se), "%v is not a *Error", e)
				require.NotEmpty(t, se.Field)
			}
			got := err.Error() + "\n"
			require.NotRegexp(t, goTypeName, got)
			require.Less(t, len(got), 8<<10)

			golden := f + ".err"
			if *update {
				require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run with -update to create it")
			require.Equal(t, string(want), got)
		})
	}
}
