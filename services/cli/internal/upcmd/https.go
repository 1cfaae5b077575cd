package upcmd

import (
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	qrcode "github.com/skip2/go-qrcode"

	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/lan"
	"github.com/alicia-voice/alicia/pkg/localca"
)

// HTTPS is how up serves the web client to the other devices of the LAN:
// a browser opens the microphone only on a secure page, and a laptop or a
// phone reaches this machine at its LAN address, not at 127.0.0.1.
type HTTPS struct {
	// Addr is where HTTPS is served (ALICIA_HTTPS_ADDR): empty, at each LAN
	// address (pkg/lan) on Port; "off", nowhere; else host:port,… as given.
	Addr string
	// Port of the LAN addresses (ALICIA_HTTPS_PORT, default 8443; 0 picks
	// a free port).
	Port int
	// CertFile and KeyFile are your own certificate and key
	// (ALICIA_TLS_CERT_FILE, ALICIA_TLS_KEY_FILE), served instead of the
	// one up signs with its local CA.
	CertFile, KeyFile string
}

// httpsOff is ALICIA_HTTPS_ADDR's value that turns HTTPS off.
const httpsOff = "off"

func defaultHTTPS() HTTPS { return HTTPS{Port: 8443} }

// httpsFrom reads ALICIA_HTTPS_* and ALICIA_TLS_* of src.
func httpsFrom(src config.Source, h *HTTPS) error {
	src.String("ALICIA_HTTPS_ADDR", &h.Addr)
	src.String("ALICIA_TLS_CERT_FILE", &h.CertFile)
	src.String("ALICIA_TLS_KEY_FILE", &h.KeyFile)
	return src.Int("ALICIA_HTTPS_PORT", &h.Port)
}

func (h HTTPS) validate() error {
	var errs []error
	if h.Port < 0 || h.Port > 65535 {
		errs = append(errs, fmt.Errorf("ALICIA_HTTPS_PORT %d: want 0..65535", h.Port))
	}
	if (h.CertFile == "") != (h.KeyFile == "") {
		errs = append(errs, errors.New("set both ALICIA_TLS_CERT_FILE and ALICIA_TLS_KEY_FILE, or neither (up signs a certificate with its local CA)"))
	}
	if h.Addr != "" && h.Addr != httpsOff {
		for _, a := range strings.Split(h.Addr, ",") {
			if _, _, err := net.SplitHostPort(strings.TrimSpace(a)); err != nil {
				errs = append(errs, fmt.Errorf("ALICIA_HTTPS_ADDR %q: %w (or %q)", a, err, httpsOff))
			}
		}
	}
	return errors.Join(errs...)
}

// httpsPlan is what up serves over HTTPS and with which certificate.
type httpsPlan struct {
	addrs             []string // listen addresses
	certFile, keyFile string
	// ca is up's local CA (nil with your own certificate).
	ca *localca.Files
	// why HTTPS is off, when addrs is empty.
	off string
}

// planHTTPS chooses the addresses and makes (or finds) the certificate:
// up's local CA in dataDir/tls, the server certificate for the LAN
// addresses, 127.0.0.1, the host's names and localhost.
func planHTTPS(h HTTPS, lanAddrs []lan.Address, hostNames []string, dataDir string, now time.Time) (httpsPlan, error) {
	var p httpsPlan
	switch {
	case h.Addr == httpsOff:
		p.off = "off (ALICIA_HTTPS_ADDR=off)"
		return p, nil
	case h.Addr != "":
		for _, a := range strings.Split(h.Addr, ",") {
			p.addrs = append(p.addrs, strings.TrimSpace(a))
		}
	default:
		for _, a := range lanAddrs {
			p.addrs = append(p.addrs, net.JoinHostPort(a.IP.String(), strconv.Itoa(h.Port)))
		}
		if len(p.addrs) == 0 {
			p.off = "off: this machine has no LAN address (set ALICIA_HTTPS_ADDR=host:port to serve it elsewhere)"
			return p, nil
		}
	}
	if h.CertFile != "" {
		p.certFile, p.keyFile = h.CertFile, h.KeyFile
		return p, nil
	}
	ips := []net.IP{net.IPv4(127, 0, 0, 1)}
	for _, a := range lanAddrs {
		ips = append(ips, a.IP)
	}
	for _, a := range p.addrs {
		if host, _, err := net.SplitHostPort(a); err == nil {
			if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
				ips = append(ips, ip)
			}
		}
	}
	names := append(append([]string{}, hostNames...), "localhost")
	cn := "Alicia local CA"
	if len(hostNames) > 0 {
		cn += " (" + hostNames[0] + ")"
	}
	files, err := localca.Ensure(filepath.Join(dataDir, "tls"), cn, names, dedupIPs(ips), now)
	if err != nil {
		return p, err
	}
	p.ca = &files
	p.certFile, p.keyFile = files.ServerCert, files.ServerKey
	return p, nil
}

func dedupIPs(ips []net.IP) []net.IP {
	seen := map[string]bool{}
	var out []net.IP
	for _, ip := range ips {
		if k := ip.String(); !seen[k] {
			seen[k] = true
			out = append(out, ip)
		}
	}
	return out
}

// printHTTPS writes the banner's HTTPS lines: the URL of each address
// (listening is where the gateway listens, so a port 0 shows the one
// chosen), the CA and its fingerprint, and a QR code of the first URL for
// a phone's camera.
func (p httpsPlan) printHTTPS(w io.Writer, listening []string) {
	if len(listening) == 0 {
		fmt.Fprintf(w, "  HTTPS:    %s\n", p.off)
		return
	}
	urls := make([]string, len(listening))
	for i, a := range listening {
		urls[i] = "https://" + a
	}
	fmt.Fprintf(w, "  HTTPS:    %s  (open it on a laptop or phone of this network: the microphone needs HTTPS)\n", strings.Join(urls, "  "))
	if p.ca != nil {
		fmt.Fprintf(w, "  CA:       %s (SHA-256 %s): trust it once on each device; how, on Android, iOS, macOS, Windows, Linux: %s/ca\n",
			p.ca.CACert, p.ca.Fingerprint, urls[0])
	} else {
		fmt.Fprintf(w, "  CA:       your certificate (ALICIA_TLS_CERT_FILE %s)\n", p.certFile)
	}
	if qr, err := qrcode.New(urls[0], qrcode.Medium); err == nil {
		fmt.Fprintf(w, "  Scan to open %s:\n", urls[0])
		for _, line := range strings.Split(strings.TrimRight(qr.ToSmallString(false), "\n"), "\n") {
			fmt.Fprintf(w, "    %s\n", line)
		}
	}
}

// nodeIP is LiveKit's node IP: the one set, else the first LAN address
// (browsers of the LAN reach it, and so does this machine), else 127.0.0.1.
func nodeIP(set string, lanAddrs []lan.Address) string {
	if set != "" {
		return set
	}
	if len(lanAddrs) > 0 {
		return lanAddrs[0].IP.String()
	}
	return "127.0.0.1"
}

// lanAddresses is pkg/lan's answer, nothing when it fails (up then serves
// loopback only, and says so).
func lanAddresses(stderr io.Writer) []lan.Address {
	addrs, err := lan.Addresses()
	if err != nil {
		fmt.Fprintf(stderr, "up: the LAN addresses could not be read: %v\n", err)
		return nil
	}
	return addrs
}
