// Package capage serves the certificate authority a device must trust to
// reach the gateway over HTTPS on the LAN (`alicia up`'s own, pkg/localca),
// and a page that says how, for each system a person is likely to hold:
//
//	GET /ca      the page: the CA's name and SHA-256 fingerprint, the steps
//	             for Android, iOS and iPadOS, macOS, Windows and Linux
//	GET /ca.crt  the CA certificate, DER (what Android, iOS and Windows install)
//	GET /ca.pem  the same, PEM (Linux, Firefox)
//
// They need no sign-in: a device fetches the CA before it trusts anything.
// Only the certificate is ever read, never a key.
package capage

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/labstack/echo/v4"

	"github.com/alicia-voice/alicia/pkg/localca"
)

// Paths the package serves.
var Paths = []string{"/ca", "/ca.crt", "/ca.pem"}

// Handler serves the CA of one file, or says there is none to install.
type Handler struct {
	ca *x509.Certificate // nil: the operator's certificate, nothing to install
	// https are the gateway's HTTPS listeners (host:port), which the page
	// links to: the addresses to open once the CA is trusted.
	https atomic.Pointer[[]string]
}

// SetHTTPS gives the addresses (host:port) the gateway serves HTTPS on; an
// unspecified host (0.0.0.0, ::) stands for the name the page was asked by.
func (h *Handler) SetHTTPS(addrs []string) { h.https.Store(&addrs) }

// httpsURLs are the HTTPS addresses to open, as seen by the request r.
func (h *Handler) httpsURLs(r *http.Request) []string {
	p := h.https.Load()
	if p == nil {
		return nil
	}
	reqHost := r.Host
	if host, _, err := net.SplitHostPort(r.Host); err == nil {
		reqHost = host
	}
	var urls []string
	for _, a := range *p {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			continue
		}
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			host = strings.Trim(reqHost, "[]")
		}
		u := "https://" + net.JoinHostPort(host, port)
		if port == "443" {
			u = "https://" + host
			if strings.Contains(host, ":") {
				u = "https://[" + host + "]"
			}
		}
		urls = append(urls, u)
	}
	return urls
}

// New reads the CA certificate (PEM) at caFile; an empty caFile serves a
// page saying the server's certificate is its operator's.
func New(caFile string) (*Handler, error) {
	if caFile == "" {
		return &Handler{}, nil
	}
	ca, err := localca.ReadCA(caFile)
	if err != nil {
		return nil, fmt.Errorf("capage: %w", err)
	}
	if !ca.IsCA {
		return nil, fmt.Errorf("capage: %s is not a CA certificate", caFile)
	}
	return &Handler{ca: ca}, nil
}

// Register adds the routes to e.
func (h *Handler) Register(e *echo.Echo) {
	e.GET("/ca", h.page)
	e.GET("/ca.crt", h.der)
	e.GET("/ca.pem", h.pem)
}

// pageCSP: the page is plain HTML with no script; its one <style>
// element needs style-src 'unsafe-inline', and nothing else is loaded.
const pageCSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func (h *Handler) page(c echo.Context) error {
	c.Response().Header().Set("Content-Security-Policy", pageCSP)
	c.Response().Header().Set("Cache-Control", "no-cache")
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	data := struct {
		Name, Fingerprint, Expires string
		Installable                bool
		HTTPS                      []string
	}{HTTPS: h.httpsURLs(c.Request())}
	if h.ca != nil {
		data.Installable = true
		data.Name = h.ca.Subject.CommonName
		data.Fingerprint = localca.Fingerprint(h.ca)
		data.Expires = h.ca.NotAfter.Format("2 January 2006")
	}
	c.Response().WriteHeader(http.StatusOK)
	return pageTemplate.Execute(c.Response(), data)
}

func (h *Handler) der(c echo.Context) error {
	if h.ca == nil {
		return echo.NewHTTPError(http.StatusNotFound, "this server's certificate is its operator's: there is no CA to install here")
	}
	c.Response().Header().Set("Content-Disposition", `attachment; filename="alicia-ca.crt"`)
	return c.Blob(http.StatusOK, "application/x-x509-ca-cert", h.ca.Raw)
}

func (h *Handler) pem(c echo.Context) error {
	if h.ca == nil {
		return echo.NewHTTPError(http.StatusNotFound, "this server's certificate is its operator's: there is no CA to install here")
	}
	c.Response().Header().Set("Content-Disposition", `attachment; filename="alicia-ca.pem"`)
	return c.Blob(http.StatusOK, "application/x-pem-file", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: h.ca.Raw}))
}

var pageTemplate = template.Must(template.New("ca").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Trust this Alicia server</title>
<style>
body { font: 16px/1.5 system-ui, sans-serif; max-width: 44rem; margin: 1.5rem auto; padding: 0 1rem; color: #1d2330; }
code, .fp { font-family: ui-monospace, monospace; word-break: break-all; }
h2 { margin-top: 1.6rem; font-size: 1.15rem; }
a.button { display: inline-block; padding: .5rem 1rem; border-radius: .4rem; background: #2c5fd6; color: #fff; text-decoration: none; margin: .2rem .4rem .2rem 0; }
li { margin: .25rem 0; }
</style>
</head>
<body>
<h1>Trust this Alicia server</h1>
{{if .Installable}}
<p>This Alicia server made its own certificate authority, <strong>{{.Name}}</strong>, and signed its HTTPS certificate with it.
Browsers let a page use the microphone only over HTTPS, so install this certificate authority once on each device you talk to Alicia from;
afterwards the HTTPS address opens without a warning, and voice works.</p>
<p>Before you trust it, check that its SHA-256 fingerprint is the one <code>alicia up</code> printed on the server:</p>
<p class="fp" id="fingerprint">{{.Fingerprint}}</p>
<p>It is valid until {{.Expires}}. It can sign certificates for this server only as long as its key stays in the server's data directory.</p>
<p><a class="button" href="/ca.crt" download>Download the certificate (alicia-ca.crt)</a><a class="button" href="/ca.pem" download>PEM (alicia-ca.pem)</a></p>

<h2 id="android">Android</h2>
<ol>
<li>Tap <em>Download the certificate</em> above.</li>
<li>Open <em>Settings → Security and privacy → More security settings → Encryption and credentials → Install a certificate → CA certificate</em>
(on some phones: <em>Settings → Security → Install from storage</em>), tap <em>Install anyway</em> and choose <code>alicia-ca.crt</code>.</li>
<li>Open the HTTPS address again in Chrome.</li>
</ol>

<h2 id="ios">iPhone and iPad (iOS, iPadOS)</h2>
<ol>
<li>Open this page in <strong>Safari</strong> and tap <em>Download the certificate</em>; allow the configuration profile to download.</li>
<li>Open <em>Settings → General → VPN &amp; Device Management</em>, tap the <em>{{.Name}}</em> profile and <em>Install</em>.</li>
<li>Open <em>Settings → General → About → Certificate Trust Settings</em> and turn on full trust for <em>{{.Name}}</em>.</li>
</ol>

<h2 id="macos">macOS</h2>
<ol>
<li>Download the certificate and open <code>alicia-ca.crt</code>: Keychain Access adds it to the <em>login</em> keychain.</li>
<li>In Keychain Access, double-click <em>{{.Name}}</em>, open <em>Trust</em> and set <em>When using this certificate</em> to <em>Always Trust</em>.
Safari and Chrome use it; Firefox: see Linux.</li>
</ol>

<h2 id="windows">Windows</h2>
<ol>
<li>Download the certificate and open <code>alicia-ca.crt</code>, then <em>Install Certificate… → Current User →
Place all certificates in the following store → Trusted Root Certification Authorities</em>, and confirm.</li>
<li>Restart the browser. Edge and Chrome use it; Firefox: see Linux.</li>
</ol>

<h2 id="linux">Linux, and Firefox anywhere</h2>
<ul>
<li><strong>Chrome, Chromium</strong>: <em>Settings → Privacy and security → Security → Manage certificates → Authorities → Import</em>,
choose <code>alicia-ca.pem</code> and tick <em>Trust this certificate for identifying websites</em>.
Or, in a terminal: <code>certutil -d sql:$HOME/.pki/nssdb -A -t "C,," -n "{{.Name}}" -i alicia-ca.pem</code> (package <code>libnss3-tools</code>).</li>
<li><strong>Firefox</strong>: <em>Settings → Privacy &amp; Security → Certificates → View Certificates → Authorities → Import</em>,
choose <code>alicia-ca.pem</code> and tick <em>Trust this CA to identify websites</em>.</li>
<li><strong>The whole system</strong> (Debian, Ubuntu): <code>sudo cp alicia-ca.pem /usr/local/share/ca-certificates/alicia-ca.crt &amp;&amp; sudo update-ca-certificates</code>.</li>
</ul>
{{else}}
<p>This server's HTTPS certificate comes from its operator (ALICIA_TLS_CERT_FILE), not from a certificate authority of Alicia's own:
there is nothing to install here. If your browser warns about the certificate, ask the operator which certificate authority to trust.</p>
{{end}}
{{if .HTTPS}}<h2 id="open">Open Alicia over HTTPS</h2>
<p>Once the certificate authority is trusted, open{{range $i, $u := .HTTPS}}{{if $i}} or{{end}} <a class="https" href="{{$u}}/">{{$u}}</a>{{end}}: there the microphone works.</p>
{{else}}<p><a href="/">Open Alicia</a></p>{{end}}
</body>
</html>
`))
