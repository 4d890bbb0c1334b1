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
	checkComposeRunners(t, "../../compose.yaml")
	_, err := os.Stat("../../examples/deploy/run.json")
	require.NoError(t, err, "the submit service's spec")
}

// composeFile is the part of a compose file these tests read.
type composeFile struct {
	Services map[string]struct {
		Command     any               `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Ports       []string          `yaml:"ports"`
		DependsOn   map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
		Networks map[string]struct {
			IPv4Address string `yaml:"ipv4_address"`
		} `yaml:"networks"`
	} `yaml:"services"`
}

func readCompose(t *testing.T, path string) composeFile {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var doc composeFile
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	return doc
}

// knownVariables are the env tags of Config, nested structs included.
func knownVariables() map[string]bool {
	known := map[string]bool{}
	var walk func(reflect.Type)
	walk = func(ct reflect.Type) {
		for i := 0; i < ct.NumField(); i++ {
			f := ct.Field(i)
			if name, _, _ := strings.Cut(f.Tag.Get("env"), ","); name != "" && name != "-" {
				known[name] = true
			} else if f.Type.Kind() == reflect.Struct && f.Tag.Get("env") == "" {
				walk(f.Type)
			}
		}
	}
	walk(reflect.TypeOf(Config{}))
	return known
}

// checkComposeRunners checks that the file defines one runner service,
// setting only variables Config reads, to a valid configuration.
func checkComposeRunners(t *testing.T, path string) {
	t.Helper()
	doc := readCompose(t, path)
	known := knownVariables()
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
	require.Equal(t, 1, runners, "%s should define the runner service", path)
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

// compose.cluster.yaml forms a 3-master, 3-replica cluster whose nodes
// announce the fixed addresses the runners are given, publishes them on
// the host's loopback only, and starts the runners after the cluster is
// formed. Docker cannot run on the build machines, so this is the check.
func TestComposeClusterFile(t *testing.T) {
	t.Parallel()
	if !knownVariables()["REDIS_CLUSTER_ADDRS"] {
		t.Skip("the runner does not read REDIS_CLUSTER_ADDRS yet (issue 10's configuration)")
	}
	const path = "../../compose.cluster.yaml"
	checkComposeRunners(t, path)
	doc := readCompose(t, path)

	// The nodes: their fixed address on the network and their port.
	nodeAddr := map[string]string{}
	for name, svc := range doc.Services {
		if !strings.HasPrefix(name, "redis-") {
			continue
		}
		ip := svc.Networks["baton-cluster"].IPv4Address
		port := svc.Environment["PORT"]
		require.NotEmpty(t, ip, "%s has no fixed address", name)
		require.Equal(t, ip, svc.Environment["IP"], "%s announces another address than its own", name)
		require.Equal(t, []string{"127.0.0.1:" + port + ":" + port}, svc.Ports,
			"%s: publish the node's own port, on loopback only", name)
		nodeAddr[name] = ip + ":" + port
	}
	require.Len(t, nodeAddr, 6, "3 masters + 3 replicas")

	create := doc.Services["cluster-create"]
	cmd, _ := yaml.Marshal(create.Command)
	require.Contains(t, string(cmd), "--cluster-replicas 1")
	for name, addr := range nodeAddr {
		require.Contains(t, string(cmd), addr, "cluster-create leaves out %s", name)
		require.Equal(t, "service_healthy", create.DependsOn[name].Condition, "cluster-create must wait for %s", name)
	}

	for _, svc := range []string{"runner", "submit"} {
		seeds := strings.Split(doc.Services[svc].Environment["REDIS_CLUSTER_ADDRS"], ",")
		require.Len(t, seeds, 3, "%s's seeds", svc)
		for _, s := range seeds {
			require.Contains(t, mapValues(nodeAddr), s, "%s's seed %s is no node", svc, s)
		}
		require.NotContains(t, doc.Services[svc].Environment, "REDIS_URL", "%s: one Redis deployment only", svc)
	}
	require.Equal(t, "service_completed_successfully", doc.Services["runner"].DependsOn["cluster-create"].Condition)
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
