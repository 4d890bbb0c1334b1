package runner_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/runner"
)

// TestRedisTLS: a rediss:// URL reaches a redis-server's TLS port that
// requires a password, trusting the private CA named by
// REDIS_TLS_CA_FILE; without that CA the certificate is refused.
func TestRedisTLS(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("redis-server"); err != nil && os.Getenv("BATON_REQUIRE_REDIS") == "" {
		t.Skip("redis-server not installed")
	}
	dir := t.TempDir()
	ca, caKey := newCert(t, dir, "ca", nil, nil)
	newCert(t, dir, "server", ca, caKey)
	port := redistest.FreePort(t)
	// The plain port stays open for Start's readiness probe; the test
	// speaks TLS to tls-port.
	redistest.Start(t, "--tls-port", strconv.Itoa(port),
		"--tls-cert-file", filepath.Join(dir, "server.pem"), "--tls-key-file", filepath.Join(dir, "server.key"),
		"--tls-ca-cert-file", filepath.Join(dir, "ca.pem"), "--tls-auth-clients", "no",
		"--requirepass", "tls-secret-pw")
	url := "rediss://:tls-secret-pw@127.0.0.1:" + strconv.Itoa(port) + "/0"

	rdb, err := runner.RedisConfig{URL: url, TLSCAFile: filepath.Join(dir, "ca.pem")}.Open()
	require.NoError(t, err)
	defer rdb.Close()
	require.NoError(t, rdb.Ping(t.Context()).Err())

	untrusted, err := runner.RedisConfig{URL: url}.Open()
	require.NoError(t, err)
	defer untrusted.Close()
	err = untrusted.Ping(t.Context()).Err()
	require.ErrorContains(t, err, "certificate")
}

// newCert writes name.pem and name.key in dir: a CA when parent is nil,
// else a server certificate for 127.0.0.1 signed by parent.
func newCert(t *testing.T, dir, name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "baton test " + name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage = x509.KeyUsageCertSign
		parent, parentKey = tmpl, key
	} else {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} // nodes dial each other with it
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	kb, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
	return cert, key
}

// TestRedisClusterTLS: REDIS_CLUSTER_ADDRS with REDIS_TLS and
// REDIS_TLS_CA_FILE reach a Redis Cluster whose nodes speak only TLS,
// clients, bus and all, and with a password; runs on threads of every
// shard are submitted, claimed and committed through it.
func TestRedisClusterTLS(t *testing.T) {
	t.Parallel()
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("BATON_REQUIRE_REDIS") != "" {
				t.Fatalf("%s not found", bin)
			}
			t.Skip(bin + " not installed")
		}
	}
	dir := t.TempDir()
	ca, caKey := newCert(t, dir, "ca", nil, nil)
	newCert(t, dir, "server", ca, caKey)
	tlsArgs := []string{"--tls-cert-file", filepath.Join(dir, "server.pem"), "--tls-key-file", filepath.Join(dir, "server.key"),
		"--tls-ca-cert-file", filepath.Join(dir, "ca.pem"), "--tls-auth-clients", "no"}
	var addrs []string
	for i := range 3 {
		port := redistest.FreePort(t)
		node := filepath.Join(dir, "node"+strconv.Itoa(i))
		require.NoError(t, os.MkdirAll(node, 0o755))
		// With --port 0 the bus port cannot be derived from it: name one.
		args := append([]string{"--port", "0", "--tls-port", strconv.Itoa(port), "--tls-cluster", "yes", "--bind", "127.0.0.1",
			"--cluster-port", strconv.Itoa(redistest.FreePort(t)),
			"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(node, "nodes.conf"), "--dir", node,
			"--save", "", "--appendonly", "no", "--requirepass", "tls-secret-pw", "--masterauth", "tls-secret-pw",
			"--logfile", filepath.Join(node, "redis.log")}, tlsArgs...)
		cmd := exec.Command("redis-server", args...)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		addrs = append(addrs, "127.0.0.1:"+strconv.Itoa(port))
	}
	cli := func(args ...string) ([]byte, error) {
		all := append([]string{"--tls", "--cacert", filepath.Join(dir, "ca.pem"), "-a", "tls-secret-pw", "--no-auth-warning"}, args...)
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		return exec.CommandContext(ctx, "redis-cli", all...).CombinedOutput()
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, a := range addrs { // up: answering over TLS
		host, port, _ := net.SplitHostPort(a)
		for {
			out, err := cli("-h", host, "-p", port, "ping")
			if err == nil && strings.Contains(string(out), "PONG") {
				break
			}
			require.True(t, time.Now().Before(deadline), "%s never answered over TLS: %s", a, out)
			time.Sleep(20 * time.Millisecond) // polling a process start-up
		}
	}
	out, err := cli(append(append([]string{"--cluster", "create"}, addrs...), "--cluster-yes")...)
	require.NoError(t, err, "%s", out)

	rdb, err := runner.RedisConfig{ClusterAddrs: addrs, Password: "tls-secret-pw", TLS: true,
		TLSCAFile: filepath.Join(dir, "ca.pem")}.Open()
	require.NoError(t, err)
	t.Cleanup(func() { _ = rdb.Close() })
	for {
		info, err := rdb.ClusterInfo(t.Context()).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			break
		}
		require.True(t, time.Now().Before(deadline), "cluster never ok: %v %s", err, info)
		time.Sleep(20 * time.Millisecond) // polling the cluster's formation
	}
	store := fence.New(rdb, nil)
	ctx := t.Context()
	for i := range 32 {
		run := "tls-" + strconv.Itoa(i)
		err := retryCluster(deadline, func() error {
			_, err := store.Submit(ctx, fence.SubmitArgs{Run: run, Digest: "d", Nodes: []fence.NodeSpec{{ID: "a", Input: "null",
				Deps: []string{}, Dependents: []string{}, Descendants: []string{}, MaxAttempts: 1}}})
			return err
		})
		require.NoError(t, err)
		c, err := store.Claim(ctx, fence.NodeRef{Thread: run, Run: run, Node: "a"}, "w", time.Minute, time.Second)
		require.NoError(t, err)
		res, err := store.Commit(ctx, c.Lease, []byte(`1`), nil)
		require.NoError(t, err)
		require.Equal(t, "SUCCEEDED", res.RunStatus)
	}
}

// retryCluster retries op while a just-formed cluster still answers
// CLUSTERDOWN on some slots, until deadline.
func retryCluster(deadline time.Time, op func() error) error {
	for {
		err := op()
		if err == nil || !strings.Contains(err.Error(), "CLUSTERDOWN") || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond) // polling the cluster's convergence
	}
}

// TestRedisSentinelTLS: REDIS_SENTINEL_ADDRS with REDIS_TLS and
// REDIS_TLS_CA_FILE reach a primary through sentinels that, like the
// data nodes, speak only TLS; the data nodes require a password.
func TestRedisSentinelTLS(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("BATON_REQUIRE_REDIS") != "" {
			t.Fatalf("redis-server not found")
		}
		t.Skip("redis-server not installed")
	}
	dir := t.TempDir()
	ca, caKey := newCert(t, dir, "ca", nil, nil)
	newCert(t, dir, "server", ca, caKey)
	tls := []string{"tls-cert-file " + filepath.Join(dir, "server.pem"), "tls-key-file " + filepath.Join(dir, "server.key"),
		"tls-ca-cert-file " + filepath.Join(dir, "ca.pem"), "tls-auth-clients no", "tls-replication yes", "port 0",
		"bind 127.0.0.1"}
	start := func(name string, lines []string, sentinel bool) string {
		port := redistest.FreePort(t)
		node := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(node, 0o755))
		conf := append(append([]string{"tls-port " + strconv.Itoa(port), "dir " + node,
			"logfile " + filepath.Join(node, "redis.log")}, tls...), lines...)
		file := filepath.Join(node, "redis.conf")
		require.NoError(t, os.WriteFile(file, []byte(strings.Join(conf, "\n")+"\n"), 0o600))
		args := []string{file}
		if sentinel {
			args = append(args, "--sentinel")
		}
		cmd := exec.Command("redis-server", args...)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return "127.0.0.1:" + strconv.Itoa(port)
	}
	data := []string{"save \"\"", "appendonly no", "requirepass tls-secret-pw", "masterauth tls-secret-pw"}
	primary := start("primary", data, false)
	host, port, _ := net.SplitHostPort(primary)
	start("replica", append(data, "replicaof "+host+" "+port), false)
	var sentinels []string
	for i := range 3 {
		sentinels = append(sentinels, start("sentinel"+strconv.Itoa(i), []string{
			"sentinel monitor tlsmaster " + host + " " + port + " 2", "sentinel auth-pass tlsmaster tls-secret-pw",
			"sentinel down-after-milliseconds tlsmaster 1000"}, true))
	}

	rdb, err := runner.RedisConfig{SentinelAddrs: sentinels, SentinelMaster: "tlsmaster", Password: "tls-secret-pw",
		TLS: true, TLSCAFile: filepath.Join(dir, "ca.pem")}.Open()
	require.NoError(t, err)
	t.Cleanup(func() { _ = rdb.Close() })
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := rdb.Ping(t.Context()).Err()
		if err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "no primary through the TLS sentinels: %v", err)
		time.Sleep(20 * time.Millisecond) // polling the processes' start-up
	}
	store := fence.New(rdb, nil)
	ctx := t.Context()
	_, err = store.Submit(ctx, fence.SubmitArgs{Run: "tls-s", Digest: "d", Nodes: []fence.NodeSpec{{ID: "a", Input: "null",
		Deps: []string{}, Dependents: []string{}, Descendants: []string{}, MaxAttempts: 1}}})
	require.NoError(t, err)
	c, err := store.Claim(ctx, fence.NodeRef{Thread: "tls-s", Run: "tls-s", Node: "a"}, "w", time.Minute, time.Second)
	require.NoError(t, err)
	res, err := store.Commit(ctx, c.Lease, []byte(`1`), nil)
	require.NoError(t, err)
	require.Equal(t, "SUCCEEDED", res.RunStatus)
}
