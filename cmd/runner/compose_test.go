package main

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// compose.yaml parses, and every variable it gives a runner exists in
// Config: a typo there would silently leave a default in place.
func TestComposeSetsOnlyKnownVariables(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../compose.yaml")
	require.NoError(t, err)
	var doc struct {
		Services map[string]struct {
			Command     any               `yaml:"command"`
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &doc))

	known := map[string]bool{}
	ct := reflect.TypeOf(Config{})
	for i := 0; i < ct.NumField(); i++ {
		if name, _, _ := strings.Cut(ct.Field(i).Tag.Get("env"), ","); name != "" && name != "-" {
			known[name] = true
		}
	}
	runners := 0
	for name, svc := range doc.Services {
		cmd, _ := yaml.Marshal(svc.Command)
		if !strings.Contains(string(cmd), "./cmd/runner") {
			continue
		}
		runners++
		for v := range svc.Environment {
			require.True(t, known[v], "compose service %s sets %s, which the runner does not read", name, v)
		}
		cfg, err := loadConfig(withTokenDefault(svc.Environment), false)
		require.NoError(t, err, "compose service %s: config invalid", name)
		require.NoError(t, cfg.validate(nil), "compose service %s: config invalid", name)
	}
	require.Equal(t, 1, runners, "compose.yaml should define the runner service")
	_, err = os.Stat("../../examples/deploy/run.json")
	require.NoError(t, err, "the submit service's spec")
}

// withTokenDefault resolves compose's ${VAR:?message} the way compose would
// with the variable set.
func withTokenDefault(env map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range env {
		if strings.HasPrefix(v, "${") {
			v = "compose-test-token-0123456789"
		}
		out[k] = v
	}
	return out
}
