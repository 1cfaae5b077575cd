package gateway

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/pkg/config"
)

// TLS serves the gateway over HTTPS beside HTTPAddr, with a certificate
// from files: its own local CA's (`alicia up`, pkg/localca) or the
// operator's. Behind a TLS proxy (the compose file's Caddy, an ingress)
// it stays off.
type TLS struct {
	// Addrs are where HTTPS is served (ALICIA_HTTPS_ADDR, comma-separated
	// host:port; default none).
	Addrs []string
	// CertFile is the certificate chain (PEM, the server's first) and
	// KeyFile its key (ALICIA_TLS_CERT_FILE, ALICIA_TLS_KEY_FILE). Both are
	// read again when they change on disk, so a renewed certificate is
	// served without a restart.
	CertFile, KeyFile string
	// CAFile is the CA certificate (PEM) the gateway hands out at /ca.crt
	// with the steps to trust it at /ca (ALICIA_TLS_CA_FILE; default none:
	// /ca says the server's certificate is its operator's).
	CAFile string
	// Ready, when not nil, receives the HTTPS listeners' addresses once
	// they accept connections (a port 0 in Addrs is chosen then).
	Ready func(addrs []string)
}

// Enabled reports whether HTTPS is served.
func (t TLS) Enabled() bool { return len(t.Addrs) > 0 }

// TLSFrom sets c.TLS from ALICIA_HTTPS_ADDR, ALICIA_TLS_CERT_FILE,
// ALICIA_TLS_KEY_FILE and ALICIA_TLS_CA_FILE of src.
func (c *Config) TLSFrom(src config.Source) {
	var addrs string
	src.String("ALICIA_HTTPS_ADDR", &addrs)
	c.TLS.Addrs = splitList(addrs)
	src.String("ALICIA_TLS_CERT_FILE", &c.TLS.CertFile)
	src.String("ALICIA_TLS_KEY_FILE", &c.TLS.KeyFile)
	src.String("ALICIA_TLS_CA_FILE", &c.TLS.CAFile)
}

func (t TLS) validate() error {
	var errs []error
	for _, a := range t.Addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			errs = append(errs, fmt.Errorf("ALICIA_HTTPS_ADDR %q: %w", a, err))
		}
	}
	if t.Enabled() {
		if t.CertFile == "" || t.KeyFile == "" {
			errs = append(errs, errors.New("ALICIA_HTTPS_ADDR needs ALICIA_TLS_CERT_FILE and ALICIA_TLS_KEY_FILE"))
		} else if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
			errs = append(errs, fmt.Errorf("ALICIA_TLS_CERT_FILE %s and ALICIA_TLS_KEY_FILE %s: %w", t.CertFile, t.KeyFile, err))
		}
	}
	if t.CAFile != "" {
		if _, err := os.Stat(t.CAFile); err != nil {
			errs = append(errs, fmt.Errorf("ALICIA_TLS_CA_FILE: %w", err))
		}
	}
	return errors.Join(errs...)
}

// certReloader serves the key pair of two files, loading it again when
// either file's modification time changes (checked at most once a
// second).
type certReloader struct {
	certFile, keyFile string
	mu                sync.Mutex
	cert              *tls.Certificate
	certMod, keyMod   time.Time
	checked           time.Time
}

func newCertReloader(certFile, keyFile string) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile}
	if _, err := r.get(time.Now()); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.get(time.Now())
}

func (r *certReloader) get(now time.Time) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cert != nil && now.Sub(r.checked) < time.Second {
		return r.cert, nil
	}
	r.checked = now
	cs, cerr := os.Stat(r.certFile)
	ks, kerr := os.Stat(r.keyFile)
	if cerr == nil && kerr == nil && r.cert != nil && cs.ModTime().Equal(r.certMod) && ks.ModTime().Equal(r.keyMod) {
		return r.cert, nil
	}
	pair, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		if r.cert != nil {
			return r.cert, nil // half-written: keep the one that works
		}
		return nil, fmt.Errorf("gateway: TLS certificate: %w", err)
	}
	r.cert = &pair
	if cerr == nil && kerr == nil {
		r.certMod, r.keyMod = cs.ModTime(), ks.ModTime()
	}
	return r.cert, nil
}

// tlsConfig is the server's TLS configuration: TLS 1.2 and up, HTTP/1.1
// only (WebSockets upgrade over it; Go's HTTP/2 server does not).
func (r *certReloader) tlsConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.getCertificate, NextProtos: []string{"http/1.1"}}
}
