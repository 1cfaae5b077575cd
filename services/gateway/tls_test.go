package gateway_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/alicia-voice/alicia/pkg/devtools"
	"github.com/alicia-voice/alicia/pkg/livekitserver"
	"github.com/alicia-voice/alicia/pkg/localca"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/gateway"
)

// httpsClient trusts only the CA in caFile.
func httpsClient(t *testing.T, caFile string) *http.Client {
	t.Helper()
	ca, err := localca.ReadCA(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
}

// TestHTTPSAndOneOriginForVoice: beside its plain HTTP, the gateway serves
// HTTPS with the local CA's certificate; a room token's LiveKit URL is the
// page's own origin (wss:// over HTTPS, ws:// over HTTP), and LiveKit's
// signalling — a real livekit-server — answers there, its HTTP check and its
// WebSocket; /ca serves the CA with its fingerprint; a renewed certificate
// is served without a restart.
func TestHTTPSAndOneOriginForVoice(t *testing.T) {
	lkBin := devtools.Need(t, devtools.LiveKit)
	lk, err := livekitserver.Start(t.Context(), livekitserver.Options{Bin: lkBin, IP: "127.0.0.1", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lk.Stop() })

	dir := t.TempDir()
	ips := []net.IP{net.ParseIP("127.0.0.1")}
	files, err := localca.Ensure(dir, "Alicia local CA (test)", []string{"localhost"}, ips, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	httpsAddr := make(chan string, 1)
	s := newStack(t, func(o *stackOptions) {
		o.gateway = func(c *gateway.Config) {
			c.LiveKit = gateway.LiveKit{URL: lk.URL, APIKey: lk.APIKey, APISecret: lk.APISecret, TokenTTL: 30 * time.Minute, SameOrigin: true}
			c.TLS = gateway.TLS{Addrs: []string{"127.0.0.1:0"}, CertFile: files.ServerCert, KeyFile: files.ServerKey, CAFile: files.CACert,
				Ready: func(a []string) { httpsAddr <- a[0] }}
		}
	})
	secure := "https://" + <-httpsAddr
	hc := httpsClient(t, files.CACert)

	do := func(method string, client *http.Client, u string, header http.Header) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, u, nil)
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, u, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	get := func(client *http.Client, u string, header http.Header) (*http.Response, string) {
		t.Helper()
		return do(http.MethodGet, client, u, header)
	}
	bearer := http.Header{"Authorization": {"Bearer " + aliceKey}}

	if resp, body := get(hc, secure+"/", nil); resp.StatusCode != http.StatusOK || !strings.Contains(body, "<div id=\"root\"") && !strings.Contains(body, "<!doctype html>") {
		t.Fatalf("web client over HTTPS: %d %.200s", resp.StatusCode, body)
	}
	var c conversation
	s.call(t, aliceKey, "POST", "/v1/conversations", map[string]any{"title": "voice"}).want(http.StatusCreated, &c)
	tokenPath := "/v1/conversations/" + c.ID + "/token"

	// Over HTTPS: wss:// on the page's own origin.
	resp, body := do(http.MethodPost, hc, secure+tokenPath, bearer)
	var g roomGrant
	decode(t, resp, body, &g)
	if want := "wss://" + strings.TrimPrefix(secure, "https://"); g.URL != want {
		t.Fatalf("grant URL over HTTPS %q, want %q", g.URL, want)
	}
	// Over plain HTTP: ws:// on that origin.
	var plain roomGrant
	s.call(t, aliceKey, "POST", tokenPath, nil).want(http.StatusOK, &plain)
	if want := "ws://" + strings.TrimPrefix(s.base, "http://"); plain.URL != want {
		t.Fatalf("grant URL over HTTP %q, want %q", plain.URL, want)
	}

	// LiveKit's HTTP check through the gateway: its answer, not the web client's.
	if resp, body := get(hc, secure+"/rtc/validate?access_token="+url.QueryEscape(g.Token), nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("/rtc/validate through the gateway: %d %s", resp.StatusCode, body)
	}
	if resp, _ := get(hc, secure+"/rtc/validate?access_token="+url.QueryEscape(g.Token[:len(g.Token)-4]+"AAAA"), nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/rtc/validate of a tampered token through the gateway: %d, want LiveKit's 401", resp.StatusCode)
	}
	// The signalling WebSocket: livekit-server's join answer comes back.
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, g.URL+"/rtc?access_token="+url.QueryEscape(g.Token)+"&auto_subscribe=1&protocol=15&sdk=js", &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		t.Fatalf("LiveKit signalling through the gateway: %v", err)
	}
	typ, msg, err := ws.Read(ctx)
	ws.Close(websocket.StatusNormalClosure, "")
	if err != nil || typ != websocket.MessageBinary || len(msg) == 0 {
		t.Fatalf("first signalling message: %v %d bytes, %v", typ, len(msg), err)
	}

	// The CA page and the certificate, without signing in.
	resp, body = get(hc, secure+"/ca", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, files.Fingerprint) || !strings.Contains(body, "Android") || !strings.Contains(body, "iPhone") ||
		!strings.Contains(body, "Windows") || !strings.Contains(body, "macOS") || !strings.Contains(body, "Linux") || strings.Contains(body, "<script") {
		t.Fatalf("/ca: %d %.300s", resp.StatusCode, body)
	}
	// Over plain HTTP too (a device fetches it before it trusts the CA),
	// with the HTTPS address to open afterwards.
	resp, body = get(http.DefaultClient, s.base+"/ca", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `href="`+secure+`/"`) {
		t.Fatalf("/ca over HTTP does not link to %s: %d %.2000s", secure, resp.StatusCode, body)
	}
	resp, body = get(http.DefaultClient, s.base+"/ca.crt", nil)
	der, err := x509.ParseCertificate([]byte(body))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-x509-ca-cert" || err != nil || localca.Fingerprint(der) != files.Fingerprint {
		t.Fatalf("/ca.crt: %d %s %v", resp.StatusCode, resp.Header.Get("Content-Type"), err)
	}
	if resp, body := get(http.DefaultClient, s.base+"/ca.pem", nil); resp.StatusCode != http.StatusOK || !strings.HasPrefix(body, "-----BEGIN CERTIFICATE-----") {
		t.Fatalf("/ca.pem: %d %.80s", resp.StatusCode, body)
	}

	// A renewed certificate (another address) is served by new connections.
	first := peerSerial(t, hc, secure)
	renewed, err := localca.Ensure(dir, "ignored", []string{"localhost"}, append(ips, net.ParseIP("127.0.0.2")), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// Modification times the reloader tells from the first files' however
	// coarse the file system's clock.
	later := time.Now().Add(time.Minute)
	for _, f := range []string{renewed.ServerCert, renewed.ServerKey} {
		if err := os.Chtimes(f, later, later); err != nil {
			t.Fatal(err)
		}
	}
	hc.CloseIdleConnections()
	testkit.Eventually(t, 5*time.Second, func() bool {
		hc.CloseIdleConnections()
		return peerSerial(t, hc, secure) != first
	}, "the renewed certificate was not served")
}

func peerSerial(t *testing.T, hc *http.Client, base string) string {
	t.Helper()
	resp, err := hc.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.TLS.PeerCertificates[0].SerialNumber.String()
}

func decode(t *testing.T, resp *http.Response, body string, v any) {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %s", resp.Request.URL, resp.StatusCode, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatal(err)
	}
}

// TestCAPageWithoutCA: with the operator's own certificate there is no CA
// to install, and the page says so.
func TestCAPageWithoutCA(t *testing.T) {
	s := newStack(t)
	resp, err := http.Get(s.base + "/ca")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "nothing to install") {
		t.Fatalf("/ca: %d %s", resp.StatusCode, b)
	}
	resp, err = http.Get(s.base + "/ca.crt")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("/ca.crt without a CA: %d", resp.StatusCode)
	}
}

// TestTLSConfig: HTTPS needs a certificate and its key that load.
func TestTLSConfig(t *testing.T) {
	dir := t.TempDir()
	files, err := localca.Ensure(dir, "CA", nil, []net.IP{net.ParseIP("127.0.0.1")}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		tls  gateway.TLS
		want string
	}{
		{"no certificate", gateway.TLS{Addrs: []string{":8443"}}, "needs ALICIA_TLS_CERT_FILE"},
		{"a key that is not the certificate's", gateway.TLS{Addrs: []string{":8443"}, CertFile: files.ServerCert, KeyFile: files.CAKey}, "ALICIA_TLS_CERT_FILE"},
		{"a bad address", gateway.TLS{Addrs: []string{"8443"}, CertFile: files.ServerCert, KeyFile: files.ServerKey}, "ALICIA_HTTPS_ADDR"},
		{"a missing CA file", gateway.TLS{CAFile: dir + "/nope.crt"}, "ALICIA_TLS_CA_FILE"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := gateway.DefaultConfig()
			cfg.PostgresURL, cfg.APIKeys, cfg.TLS = "postgres://x", "k-0123456789abcdef", c.tls
			if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate: %v, want %q", err, c.want)
			}
		})
	}
	cfg := gateway.DefaultConfig()
	cfg.PostgresURL, cfg.APIKeys = "postgres://x", "k-0123456789abcdef"
	cfg.TLS = gateway.TLS{Addrs: []string{":8443"}, CertFile: files.ServerCert, KeyFile: files.ServerKey, CAFile: files.CACert}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg.LiveKit = gateway.LiveKit{SameOrigin: true, TokenTTL: time.Hour}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "ALICIA_LIVEKIT_SAME_ORIGIN needs") {
		t.Fatalf("same origin without LiveKit: %v", err)
	}
}
