package localca_test

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/localca"
)

func verify(t *testing.T, f localca.Files, name string, now time.Time) error {
	t.Helper()
	ca, err := localca.ReadCA(f.CACert)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(f.ServerCert, f.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err
}

// TestEnsure: the CA is made once (key 0600) and kept; the server
// certificate verifies against it for every name and address, for those
// only, and is made anew when they change or it nears its end.
func TestEnsure(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	now := time.Now()
	names := []string{"box", "box.local", "localhost"}
	ips := []net.IP{net.ParseIP("192.168.1.20"), net.ParseIP("127.0.0.1")}
	f, err := localca.Ensure(dir, "Alicia local CA (box)", names, ips, now)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Created || !f.Renewed || len(f.Fingerprint) != 32*3-1 {
		t.Fatalf("first Ensure: %+v", f)
	}
	for _, p := range []string{f.CAKey, f.ServerKey} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v, want mode 0600", p, fi, err)
		}
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v %v", fi, err)
	}
	for _, n := range []string{"box", "box.local", "localhost", "192.168.1.20", "127.0.0.1"} {
		if err := verify(t, f, n, now); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	for _, n := range []string{"other", "192.168.1.21"} {
		if err := verify(t, f, n, now); err == nil {
			t.Errorf("%s verified", n)
		}
	}
	ca, _ := localca.ReadCA(f.CACert)
	if !ca.IsCA || !ca.MaxPathLenZero || ca.Subject.CommonName != "Alicia local CA (box)" || localca.Fingerprint(ca) != f.Fingerprint {
		t.Fatalf("CA %+v", ca.Subject)
	}
	caPEM, _ := os.ReadFile(f.CACert)
	serverPEM, _ := os.ReadFile(f.ServerCert)

	// Again, the same names in another order: nothing is made.
	g, err := localca.Ensure(dir, "ignored", []string{"localhost", "box.local", "box"}, []net.IP{ips[1], ips[0]}, now.Add(time.Hour))
	if err != nil || g.Created || g.Renewed || g.Fingerprint != f.Fingerprint {
		t.Fatalf("second Ensure: %+v %v", g, err)
	}
	if b, _ := os.ReadFile(f.ServerCert); string(b) != string(serverPEM) {
		t.Fatal("the server certificate was rewritten")
	}

	// A new address: a new server certificate from the same CA.
	moved := []net.IP{net.ParseIP("10.0.0.7"), net.ParseIP("127.0.0.1")}
	g, err = localca.Ensure(dir, "ignored", names, moved, now)
	if err != nil || g.Created || !g.Renewed {
		t.Fatalf("Ensure after a move: %+v %v", g, err)
	}
	if b, _ := os.ReadFile(f.CACert); string(b) != string(caPEM) {
		t.Fatal("the CA was remade: every device would have to trust it again")
	}
	if err := verify(t, g, "10.0.0.7", now); err != nil {
		t.Fatal(err)
	}
	if err := verify(t, g, "192.168.1.20", now); err == nil {
		t.Fatal("the old address is still in the certificate")
	}

	// Near its end: renewed.
	late := now.Add(localca.ServerValidity - localca.RenewBefore + time.Hour)
	g, err = localca.Ensure(dir, "ignored", names, moved, late)
	if err != nil || !g.Renewed {
		t.Fatalf("Ensure near the end: %+v %v", g, err)
	}
	if err := verify(t, g, "box", late.Add(300*24*time.Hour)); err != nil {
		t.Fatalf("renewed certificate: %v", err)
	}
}

// TestEnsureRefusesBrokenFiles: a key that is not the certificate's, or a
// CA that is not one, is an error saying which file, never silently
// replaced (devices trust the old CA).
func TestEnsureRefusesBrokenFiles(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	ips := []net.IP{net.ParseIP("127.0.0.1")}
	if _, err := localca.Ensure(dir, "CA", nil, ips, now); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	if _, err := localca.Ensure(other, "CA", nil, ips, now); err != nil {
		t.Fatal(err)
	}
	key, _ := os.ReadFile(filepath.Join(other, localca.CAKey))
	if err := os.WriteFile(filepath.Join(dir, localca.CAKey), key, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := localca.Ensure(dir, "CA", nil, ips, now)
	if err == nil || !strings.Contains(err.Error(), "is not the key of") {
		t.Fatalf("mismatched key: %v", err)
	}
	if _, err := localca.Ensure(t.TempDir(), "CA", nil, nil, now); err == nil {
		t.Fatal("a certificate for nothing was made")
	}
	// An expired CA.
	old := t.TempDir()
	if _, err := localca.Ensure(old, "CA", nil, ips, now.Add(-localca.CAValidity-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := localca.Ensure(old, "CA", nil, ips, now); err == nil || !strings.Contains(err.Error(), "move it away") {
		t.Fatalf("expired CA: %v", err)
	}
}
