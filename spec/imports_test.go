package spec_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The spec language can be used, and tested, without a Redis or a queue:
// nothing it links talks to either.
func TestSpecLinksNoRedisOrQueue(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, dep := range strings.Fields(string(out)) {
		require.NotEqual(t, "github.com/batonrun/baton/fence", dep, "spec links the Redis store")
		for _, banned := range []string{"github.com/redis/", "github.com/hibiken/", "github.com/prometheus/"} {
			require.False(t, strings.HasPrefix(dep, banned), "spec links %s", dep)
		}
	}
}
