package upcmd

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/lan"
	"github.com/alicia-voice/alicia/pkg/localca"
)

func TestPlanHTTPS(t *testing.T) {
	lanAddrs := []lan.Address{{IP: net.ParseIP("192.168.1.20").To4(), Interface: "wlan0", Default: true}, {IP: net.ParseIP("10.0.0.4").To4(), Interface: "eth0"}}
	now := time.Now()

	t.Run("each LAN address, a certificate for them, the host's names and loopback", func(t *testing.T) {
		dir := t.TempDir()
		p, err := planHTTPS(defaultHTTPS(), lanAddrs, []string{"box", "box.local"}, dir, now)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(p.addrs, " ") != "192.168.1.20:8443 10.0.0.4:8443" || p.ca == nil || p.ca.CACert != filepath.Join(dir, "tls", localca.CACert) {
			t.Fatalf("plan %+v", p)
		}
		pem, err := os.ReadFile(p.certFile)
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(firstDER(t, pem))
		if err != nil {
			t.Fatal(err)
		}
		ca, _ := localca.ReadCA(p.ca.CACert)
		roots := x509.NewCertPool()
		roots.AddCert(ca)
		for _, name := range []string{"192.168.1.20", "10.0.0.4", "127.0.0.1", "box", "box.local", "localhost"} {
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name}); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		if !strings.HasPrefix(ca.Subject.CommonName, "Alicia local CA (box)") {
			t.Errorf("CA name %q", ca.Subject.CommonName)
		}
		var out bytes.Buffer
		p.printHTTPS(&out, []string{"192.168.1.20:8443", "10.0.0.4:8443"})
		for _, want := range []string{"HTTPS:    https://192.168.1.20:8443  https://10.0.0.4:8443", "CA:       " + p.ca.CACert, p.ca.Fingerprint,
			"https://192.168.1.20:8443/ca", "Scan to open https://192.168.1.20:8443:", "█"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("banner lacks %q:\n%s", want, out.String())
			}
		}
	})
	t.Run("off", func(t *testing.T) {
		p, err := planHTTPS(HTTPS{Addr: "off", Port: 8443}, lanAddrs, nil, t.TempDir(), now)
		if err != nil || len(p.addrs) != 0 || !strings.Contains(p.off, "ALICIA_HTTPS_ADDR=off") {
			t.Fatalf("%+v %v", p, err)
		}
		var out bytes.Buffer
		p.printHTTPS(&out, nil)
		if !strings.Contains(out.String(), "HTTPS:    off") {
			t.Fatal(out.String())
		}
	})
	t.Run("no LAN address", func(t *testing.T) {
		dir := t.TempDir()
		p, err := planHTTPS(defaultHTTPS(), nil, nil, dir, now)
		if err != nil || len(p.addrs) != 0 || !strings.Contains(p.off, "no LAN address") {
			t.Fatalf("%+v %v", p, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "tls")); err == nil {
			t.Fatal("a CA was made though nothing is served over HTTPS")
		}
	})
	t.Run("your own certificate", func(t *testing.T) {
		p, err := planHTTPS(HTTPS{Port: 8443, CertFile: "/etc/alicia/cert.pem", KeyFile: "/etc/alicia/key.pem"}, lanAddrs, nil, t.TempDir(), now)
		if err != nil || p.ca != nil || p.certFile != "/etc/alicia/cert.pem" || len(p.addrs) != 2 {
			t.Fatalf("%+v %v", p, err)
		}
	})
	t.Run("explicit addresses", func(t *testing.T) {
		p, err := planHTTPS(HTTPS{Addr: "127.0.0.1:0, 10.9.9.9:443", Port: 8443}, lanAddrs, nil, t.TempDir(), now)
		if err != nil || strings.Join(p.addrs, " ") != "127.0.0.1:0 10.9.9.9:443" {
			t.Fatalf("%+v %v", p, err)
		}
	})
	if err := (HTTPS{Addr: "8443"}).validate(); err == nil {
		t.Fatal("an address without a port was accepted")
	}
	if err := (HTTPS{CertFile: "c"}).validate(); err == nil || !strings.Contains(err.Error(), "ALICIA_TLS_KEY_FILE") {
		t.Fatalf("a certificate without its key: %v", err)
	}
	if got := nodeIP("", lanAddrs); got != "192.168.1.20" {
		t.Fatalf("node IP %s, want the default route's LAN address", got)
	}
	if got := nodeIP("", nil); got != "127.0.0.1" {
		t.Fatalf("node IP without a LAN: %s", got)
	}
	if got := nodeIP("10.1.1.1", lanAddrs); got != "10.1.1.1" {
		t.Fatalf("node IP set: %s", got)
	}
}

func firstDER(t *testing.T, b []byte) []byte {
	t.Helper()
	block, _ := pemDecode(b)
	if block == nil {
		t.Fatal("no PEM")
	}
	return block
}

func pemDecode(b []byte) ([]byte, []byte) {
	blk, rest := pem.Decode(b)
	if blk == nil {
		return nil, rest
	}
	return blk.Bytes, rest
}
