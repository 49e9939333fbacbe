package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/internal/otlp"
)

// TestOTLPTransportConfig: the export's timeout, compression and TLS
// files come from the standard OTEL_EXPORTER_OTLP_* variables (the
// _TRACES_ form wins); a wrong one is a start-up problem naming the
// variable.
func TestOTLPTransportConfig(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath := writeTestCert(t, dir)
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string // a problem's text, or "" for none
		ok   func(otlp.Config) bool
	}{
		{"defaults", map[string]string{}, "", func(c otlp.Config) bool { return c.Timeout == 0 && !c.Gzip && c.TLS == nil }},
		{"timeout and gzip", map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "2500", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}, "",
			func(c otlp.Config) bool { return c.Timeout == 2500*time.Millisecond && c.Gzip }},
		{"traces form wins", map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "2500", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "700",
			"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "none"}, "",
			func(c otlp.Config) bool { return c.Timeout == 700*time.Millisecond && !c.Gzip }},
		{"CA and client pair", map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": certPath,
			"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": certPath, "OTEL_EXPORTER_OTLP_CLIENT_KEY": keyPath}, "",
			func(c otlp.Config) bool { return c.TLS != nil && c.TLS.RootCAs != nil && len(c.TLS.Certificates) == 1 }},
		{"bad timeout", map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "10s"}, "OTEL_EXPORTER_OTLP_TIMEOUT must be a positive number of milliseconds", nil},
		{"bad compression", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "zstd"}, "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION must be gzip or none", nil},
		{"missing CA", map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": filepath.Join(dir, "nope.pem")}, "OTEL_EXPORTER_OTLP_CERTIFICATE: open", nil},
		{"CA not PEM", map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": junk}, "holds no PEM certificate", nil},
		{"cert without key", map[string]string{"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": certPath}, "must be set together", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var probs problems
			cfg := otlp.Config{URL: "http://collector:4318/v1/traces"}
			ok := otlpTransport(func(k string) string { return tc.env[k] }, &cfg, &probs)
			got := strings.Join(probs.list, "\n")
			switch {
			case tc.want == "" && (!ok || got != ""):
				t.Errorf("problems %q", got)
			case tc.want != "" && (ok || !strings.Contains(got, tc.want)):
				t.Errorf("ok=%v problems %q, want %q", ok, got, tc.want)
			case tc.ok != nil && !tc.ok(cfg):
				t.Errorf("config %+v", cfg)
			}
		})
	}
}

// writeTestCert writes a self-signed certificate and its key as PEM.
func writeTestCert(t *testing.T, dir string) (certPath, keyPath string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "collector"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certPath, keyPath
}
