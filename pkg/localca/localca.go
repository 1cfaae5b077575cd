// Package localca is the certificate authority of one Alicia machine, for
// HTTPS on the LAN without a public name: `alicia up` makes it once in its
// data directory and signs a server certificate for the machine's LAN
// addresses and host names with it. A person trusts the CA once on each
// device (the gateway serves it at /ca with the steps for each system);
// every later certificate of the machine is then trusted too.
//
// Files, in Dir:
//
//	ca.crt      the CA's certificate (PEM), the one a device trusts
//	ca.key      its private key (PEM, mode 0600)
//	server.crt  the server certificate, then the CA's (PEM)
//	server.key  its private key (PEM, mode 0600)
//
// The CA is ECDSA P-256, valid 10 years, and may sign only server
// certificates (path length 0, name constraints are left out: some
// Android versions refuse a root that has them). A server certificate is
// valid 397 days (Apple's and Chrome's limit for one a device is asked to
// trust is 398 and 825), and is made anew when its names or addresses
// change or it has less than 30 days left.
package localca

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// File names in Dir.
const (
	CACert     = "ca.crt"
	CAKey      = "ca.key"
	ServerCert = "server.crt"
	ServerKey  = "server.key"
)

// Validity of the certificates, and how long before its end a server
// certificate is renewed.
const (
	CAValidity     = 10 * 365 * 24 * time.Hour
	ServerValidity = 397 * 24 * time.Hour
	RenewBefore    = 30 * 24 * time.Hour
)

// Files are the paths of what Ensure made or found.
type Files struct {
	Dir                                  string
	CACert, CAKey, ServerCert, ServerKey string
	// Fingerprint is the SHA-256 of the CA certificate (DER), as
	// colon-separated hex: what a person compares before trusting it.
	Fingerprint string
	// Created and Renewed report whether this call made the CA and the
	// server certificate.
	Created, Renewed bool
}

// Ensure makes the CA in dir unless it is there, and a server certificate
// for names and ips unless a valid one for exactly those is there.
// commonName names the CA ("Alicia local CA (<host>)").
func Ensure(dir, commonName string, names []string, ips []net.IP, now time.Time) (Files, error) {
	f := Files{Dir: dir, CACert: filepath.Join(dir, CACert), CAKey: filepath.Join(dir, CAKey),
		ServerCert: filepath.Join(dir, ServerCert), ServerKey: filepath.Join(dir, ServerKey)}
	if len(names) == 0 && len(ips) == 0 {
		return f, errors.New("localca: a server certificate needs a name or an address")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return f, fmt.Errorf("localca: %w", err)
	}
	ca, caKey, err := loadPair(f.CACert, f.CAKey)
	if errors.Is(err, os.ErrNotExist) {
		ca, caKey, err = newCA(f, commonName, now)
		f.Created = true
	}
	if err != nil {
		return f, err
	}
	if !ca.IsCA || now.After(ca.NotAfter) {
		return f, fmt.Errorf("localca: %s is not a valid CA certificate (expired %s?): move it away to make a new CA", f.CACert, ca.NotAfter.Format(time.DateOnly))
	}
	f.Fingerprint = Fingerprint(ca)
	if leaf, _, err := loadPair(f.ServerCert, f.ServerKey); err == nil && fits(leaf, ca, names, ips, now) {
		return f, nil
	}
	if err := newServer(f, ca, caKey, names, ips, now); err != nil {
		return f, err
	}
	f.Renewed = true
	return f, nil
}

// Fingerprint is the SHA-256 of c's DER as colon-separated upper-case hex.
func Fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	h := strings.ToUpper(hex.EncodeToString(sum[:]))
	var b strings.Builder
	for i := 0; i < len(h); i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(h[i : i+2])
	}
	return b.String()
}

// fits reports whether leaf was signed by ca, names exactly names and ips,
// and has more than RenewBefore left.
func fits(leaf, ca *x509.Certificate, names []string, ips []net.IP, now time.Time) bool {
	if leaf.CheckSignatureFrom(ca) != nil || now.Add(RenewBefore).After(leaf.NotAfter) || now.Before(leaf.NotBefore) {
		return false
	}
	if !sameStrings(leaf.DNSNames, names) {
		return false
	}
	var have, want []string
	for _, ip := range leaf.IPAddresses {
		have = append(have, ip.String())
	}
	for _, ip := range ips {
		want = append(want, ip.String())
	}
	return sameStrings(have, want)
}

func sameStrings(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

func newCA(f Files, commonName string, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("localca: %w", err)
	}
	tpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"Alicia"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(CAValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("localca: %w", err)
	}
	// The key first: a certificate without its key would be taken for a CA
	// at the next start.
	if err := writeKey(f.CAKey, key); err != nil {
		return nil, nil, err
	}
	if err := writeFile(f.CACert, pemBlock("CERTIFICATE", der), 0o644); err != nil {
		return nil, nil, err
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("localca: %w", err)
	}
	return ca, key, nil
}

func newServer(f Files, ca *x509.Certificate, caKey *ecdsa.PrivateKey, names []string, ips []net.IP, now time.Time) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("localca: %w", err)
	}
	cn := ""
	if len(names) > 0 {
		cn = names[0]
	} else {
		cn = ips[0].String()
	}
	tpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"Alicia"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(ServerValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     names,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("localca: %w", err)
	}
	if err := writeKey(f.ServerKey, key); err != nil {
		return err
	}
	chain := append(pemBlock("CERTIFICATE", der), pemBlock("CERTIFICATE", ca.Raw)...)
	return writeFile(f.ServerCert, chain, 0o644)
}

// loadPair reads a certificate (the first of the file) and its ECDSA key.
func loadPair(certPath, keyPath string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cert, err := ReadCA(certPath)
	if err != nil {
		return nil, nil, err
	}
	kb, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, nil, err
	}
	kblock, _ := pem.Decode(kb)
	if kblock == nil {
		return nil, nil, fmt.Errorf("localca: %s is not PEM", keyPath)
	}
	key, err := x509.ParseECPrivateKey(kblock.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("localca: %s: %w", keyPath, err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, nil, fmt.Errorf("localca: %s is not the key of %s", keyPath, certPath)
	}
	return cert, key, nil
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("localca: %w", err)
	}
	return writeFile(path, pemBlock("EC PRIVATE KEY", der), 0o600)
}

// writeFile replaces path (a new file, so the mode is ours).
func writeFile(path string, b []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return fmt.Errorf("localca: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("localca: %w", err)
	}
	return nil
}

func pemBlock(typ string, der []byte) []byte {
	var b bytes.Buffer
	_ = pem.Encode(&b, &pem.Block{Type: typ, Bytes: der})
	return b.Bytes()
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n.Add(n, big.NewInt(1))
}

// ReadCA returns the certificate at path (PEM; the first of a chain): the
// CA's, or a server certificate.
func ReadCA(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("localca: %s holds no PEM certificate", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("localca: %s: %w", path, err)
	}
	return c, nil
}
