// Package tlstest generates a throw-away certificate authority with a
// server certificate (for 127.0.0.1, ::1 and localhost) and a client
// certificate, written as PEM files into a test's temporary directory. Only
// _test.go files import it: nothing generated here is ever committed.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// PKI is one generated authority and the certificates it signed, in memory
// and as files in Dir.
type PKI struct {
	Dir string
	// CAFile is the authority's certificate.
	CAFile string
	// ServerCertFile and ServerKeyFile are the server's pair (SANs
	// 127.0.0.1, ::1, localhost).
	ServerCertFile, ServerKeyFile string
	// ClientCertFile and ClientKeyFile are a client's pair (CN "receipts").
	ClientCertFile, ClientKeyFile string

	CA         *x509.Certificate
	CAPool     *x509.CertPool
	ServerCert tls.Certificate
	ClientCert tls.Certificate
}

// New generates a PKI in a new temporary directory of t.
func New(t testing.TB) *PKI {
	t.Helper()
	return NewIn(t, t.TempDir())
}

// NewIn generates a PKI in dir (which must exist). Keys are written 0600.
func NewIn(t testing.TB, dir string) *PKI {
	t.Helper()
	p := &PKI{Dir: dir}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: "receipts test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	p.CA, err = x509.ParseCertificate(caDER)
	require.NoError(t, err)
	p.CAPool = x509.NewCertPool()
	p.CAPool.AddCert(p.CA)
	p.CAFile = filepath.Join(dir, "ca.crt")
	writePEM(t, p.CAFile, "CERTIFICATE", caDER, 0o644)

	p.ServerCert, p.ServerCertFile, p.ServerKeyFile = p.leaf(t, "server", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "localhost"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback},
		// Servers that also dial their peers (a Redis Cluster bus) present
		// it as a client certificate too.
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}, caKey)
	p.ClientCert, p.ClientCertFile, p.ClientKeyFile = p.leaf(t, "client", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "receipts"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, caKey)
	return p
}

func (p *PKI) leaf(t testing.TB, name string, tmpl *x509.Certificate, caKey *ecdsa.PrivateKey) (tls.Certificate, string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl.SerialNumber = serial(t)
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.CA, &key.PublicKey, caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile := filepath.Join(p.Dir, name+".crt"), filepath.Join(p.Dir, name+".key")
	writePEM(t, certFile, "CERTIFICATE", der, 0o644)
	writePEM(t, keyFile, "PRIVATE KEY", keyDER, 0o600)
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	require.NoError(t, err)
	return pair, certFile, keyFile
}

// ServerConfig is a TLS server config with the server certificate; with
// clientAuth, it requires a client certificate signed by the CA.
func (p *PKI) ServerConfig(clientAuth bool) *tls.Config {
	c := &tls.Config{Certificates: []tls.Certificate{p.ServerCert}, MinVersion: tls.VersionTLS12}
	if clientAuth {
		c.ClientAuth = tls.RequireAndVerifyClientCert
		c.ClientCAs = p.CAPool
	}
	return c
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	require.NoError(t, err)
	return n
}

func writePEM(t testing.TB, path, typ string, der []byte, mode os.FileMode) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode))
}
