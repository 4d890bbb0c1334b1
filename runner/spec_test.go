package runner_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/runner"
)

// Every problem in a spec is reported at once, each naming its field.
func TestSpecErrorsNameTheField(t *testing.T) {
	t.Parallel()
	big := `"` + strings.Repeat("x", 2000) + `"`
	for _, tc := range []struct {
		name, spec string
		fields     []string
	}{
		{"empty run", `{"nodes":[]}`, []string{"nodes"}},
		{"brace in run id", `{"id":"a{b}","nodes":[{"id":"a","kind":"noop"}]}`, []string{"id"}},
		{"colon in node id", `{"nodes":[{"id":"a:b","kind":"noop"}]}`, []string{"nodes[0].id"}},
		{"space in thread", `{"thread":"a b","nodes":[{"id":"a","kind":"noop"}]}`, []string{"thread"}},
		{"long id", `{"nodes":[{"id":"` + strings.Repeat("n", 129) + `","kind":"noop"}]}`, []string{"nodes[0].id"}},
		{"missing kind", `{"nodes":[{"id":"a"}]}`, []string{"nodes[0].kind"}},
		{"duplicate node", `{"nodes":[{"id":"a","kind":"noop"},{"id":"a","kind":"noop"}]}`, []string{"nodes[1].id"}},
		{"unknown dep", `{"nodes":[{"id":"a","kind":"noop","deps":["zz"]}]}`, []string{"nodes[0].deps[0]"}},
		{"self dep", `{"nodes":[{"id":"a","kind":"noop","deps":["a"]}]}`, []string{"nodes[0].deps[0]"}},
		{"cycle", `{"nodes":[{"id":"a","kind":"noop","deps":["c"]},{"id":"b","kind":"noop","deps":["a"]},{"id":"c","kind":"noop","deps":["b"]}]}`, []string{"nodes"}},
		{"oversized input", `{"nodes":[{"id":"a","kind":"noop","input":` + big + `}]}`, []string{"nodes[0].input"}},
		{"multitask without thread", `{"multitask":"reject","nodes":[{"id":"a","kind":"noop"}]}`, []string{"multitask"}},
		{"unknown multitask", `{"thread":"t","multitask":"queue","nodes":[{"id":"a","kind":"noop"}]}`, []string{"multitask"}},
		{"several at once", `{"id":"{x}","nodes":[{"id":"","kind":""},{"id":"b","kind":"noop","deps":["q"]}]}`,
			[]string{"id", "nodes[0].id", "nodes[0].kind", "nodes[1].deps[0]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := runner.ParseSpec([]byte(tc.spec))
			require.NoError(t, err)
			err = s.Validate(runner.Limits{MaxInputBytes: 1000})
			require.ErrorIs(t, err, runner.ErrInvalidSpec)
			var got []string
			for _, e := range unjoin(err) {
				var se *runner.SpecError
				require.True(t, errors.As(e, &se), "%v is not a *SpecError", e)
				got = append(got, se.Field)
			}
			require.ElementsMatch(t, tc.fields, got, err.Error())
		})
	}
}

func TestSpecParsesJSONAndYAML(t *testing.T) {
	t.Parallel()
	y, err := runner.ParseSpec([]byte("id: r1\nnodes:\n  - id: a\n    kind: sleep\n    input: {duration: 2s}\n    timeout: 90\n  - {id: b, kind: noop, deps: [a]}\n"))
	require.NoError(t, err)
	require.NoError(t, y.Validate(runner.Limits{}))
	require.Equal(t, "r1", y.ID)
	require.Equal(t, []string{"a"}, y.Nodes[1].Deps)
	require.JSONEq(t, `{"duration":"2s"}`, string(y.Nodes[0].Input))
	require.Equal(t, 90*time.Second, time.Duration(y.Nodes[0].Timeout))

	_, err = runner.ParseSpec([]byte(`{"nodes":[{"id":"a","kind":"noop","max_atempts":3}]}`))
	require.ErrorIs(t, err, runner.ErrInvalidSpec, "a misspelt field is an error, not a silent default")
	require.Contains(t, err.Error(), "max_atempts")
	_, err = runner.ParseSpec([]byte("  "))
	require.ErrorIs(t, err, runner.ErrInvalidSpec)
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
