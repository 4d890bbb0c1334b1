package runner_test

import (
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
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
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
