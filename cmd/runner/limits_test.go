package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// LIMITS_FILE is read whole: every bad entry is named, and nothing is set
// unless all are good.
func TestReadLimits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	require.NoError(t, os.WriteFile(good, []byte(`{"limits": [{"name": "openai", "concurrency": 4, "rate": "600/m", "burst": 5},
		{"name": "tenant:*", "concurrency": 1}]}`), 0o600))
	ls, err := readLimits(good)
	require.NoError(t, err)
	require.Len(t, ls, 2)
	require.Equal(t, "600/m", ls[0].RateString())

	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"limits": [{"name": "a", "concurrency": -1}, {"name": "b", "rate": "1/s", "burst": -3},
		{"name": "a", "concurrency": 2}]}`), 0o600))
	_, err = readLimits(bad)
	require.ErrorContains(t, err, "limits[0]")
	require.ErrorContains(t, err, "concurrency: -1")
	require.ErrorContains(t, err, "limits[1]")
	require.ErrorContains(t, err, "burst: -3")
	require.ErrorContains(t, err, `limits[2]: "a" is limits[0] again`)

	fortnight := filepath.Join(dir, "f.json")
	require.NoError(t, os.WriteFile(fortnight, []byte(`{"limits": [{"name": "a", "rate": "10/fortnight"}]}`), 0o600))
	_, err = readLimits(fortnight)
	require.ErrorContains(t, err, "fortnight")
}
