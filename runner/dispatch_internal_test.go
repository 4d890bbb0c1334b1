package runner

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Concurrency is divided among the dispatch loops without losing or adding
// a slot, and never into loops without one.
func TestSplitConcurrency(t *testing.T) {
	t.Parallel()
	require.Equal(t, []int{10}, split(10, 1))
	require.Equal(t, []int{4, 3, 3}, split(10, 3))
	require.Equal(t, []int{1, 1}, split(2, 5))
	require.Equal(t, []int{8, 8}, split(16, 2))
}
