package kinds_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/kinds"
)

func TestNoopEchoesItsInput(t *testing.T) {
	t.Parallel()
	for input, want := range map[string]string{
		`{"a":[1,2],"b":"x"}`: `{"a":[1,2],"b":"x"}`,
		` 42 `:                `42`,
		``:                    `{}`,
		`null`:                `{}`,
	} {
		out, err := kinds.Noop().Run(context.Background(), newTask("noop", input))
		require.NoError(t, err, "input %q", input)
		assert.JSONEq(t, want, string(out), "input %q", input)
	}
}

func TestNoopRejectsInvalidJSONPermanently(t *testing.T) {
	t.Parallel()
	_, err := kinds.Noop().Run(context.Background(), newTask("noop", `{"a":`))
	require.Error(t, err)
	assert.True(t, runner.IsPermanent(err), "err = %v", err)
}
