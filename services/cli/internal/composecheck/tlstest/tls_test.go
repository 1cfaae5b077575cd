// Package tlstest runs the compose file's tls profile for real, inside the
// package's own network namespace (pkg/testkit/netns; Caddy and LiveKit
// bind every interface of it, as in their containers): Caddy 2.11.4, built
// from its module, with deploy/caddy/Caddyfile and a certificate the test
// made, in front of a stand-in gateway and a real livekit-server started
// by the compose file's own livekit entrypoint with TURN over TLS on.
package tlstest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/alicia-voice/alicia/pkg/devtools"
	"github.com/alicia-voice/alicia/pkg/livekitserver"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/netns"
	"github.com/alicia-voice/alicia/services/cli/internal/composecheck"
	"github.com/alicia-voice/alicia/services/gateway"
)

func TestMain(m *testing.M) { netns.Main(m) }

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.work above the test's directory")
		}
		dir = parent
	}
}

// pki is a CA and, in dir, a certificate it signed for names, as an
// operator puts them in deploy/tls/: fullchain.pem and privkey.pem.
type pki struct {
	pool      *x509.CertPool
	dir       string
	cert, key string
}

func newPKI(t *testing.T, names ...string) pki {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "alicia test CA"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTpl, caTpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := pki{pool: x509.NewCertPool(), dir: t.TempDir()}
	p.pool.AddCert(ca)
	p.cert, p.key = filepath.Join(p.dir, "fullchain.pem"), filepath.Join(p.dir, "privkey.pem")
	chain := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})...)
	if err := os.WriteFile(p.cert, chain, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// client reaches every name at the namespace's address, from its other
// address (so the proxy sees a client address that is not its own), and
// trusts only the test's CA.
func (p pki) client() *http.Client {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(netns.PeerIP())}, Timeout: 5 * time.Second}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		_, port, _ := net.SplitHostPort(addr)
		return dialer.DialContext(ctx, network, net.JoinHostPort(netns.IP(), port))
	}
	return &http.Client{
		Transport:     &http.Transport{DialContext: dial, TLSClientConfig: &tls.Config{RootCAs: p.pool}, ForceAttemptHTTP2: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       10 * time.Second,
	}
}

// freeLocal is a free port on 127.0.0.1.
func freeLocal(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// start runs cmd until the test ends, its output in the test's log when it fails.
func start(t *testing.T, cmd *exec.Cmd) *testkit.SyncBuffer {
	t.Helper()
	var out testkit.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("%s:\n%s", filepath.Base(cmd.Path), out.String())
		}
	})
	return &out
}

// livekitScript is the compose file's livekit entrypoint script, pointed
// at the test's files instead of the container's.
func livekitScript(t *testing.T, root, secrets string) string {
	t.Helper()
	f, err := composecheck.Load(filepath.Join(root, "docker-compose.yml"), map[string]string{"ALICIA_LIVEKIT_NODE_IP": "192.0.2.10"})
	if err != nil {
		t.Fatal(err)
	}
	ep := f.Services["livekit"].Entrypoint
	if len(ep) != 3 || ep[0] != "/bin/sh" || ep[1] != "-c" {
		t.Fatalf("livekit entrypoint %q: want [/bin/sh -c <script>]", ep)
	}
	bin := devtools.Need(t, devtools.LiveKit)
	tmp := t.TempDir()
	return strings.NewReplacer(
		"/livekit-server", bin,
		"/etc/livekit.yaml", filepath.Join(root, "deploy", "livekit.yaml"),
		"/tmp/livekit.yaml", filepath.Join(tmp, "livekit.yaml"),
		"/run/secrets/", secrets+"/",
	).Replace(ep[2])
}

func secrets(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, v := range map[string]string{"livekit_api_key": livekitserver.NewKey(), "livekit_api_secret": livekitserver.NewSecret()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestLiveKitEntrypoint: the compose file's livekit entrypoint refuses a
// loopback NODE_IP, and TURN without its certificate, with a message.
func TestLiveKitEntrypoint(t *testing.T) {
	netns.Require(t)
	root := repoRoot(t)
	script := livekitScript(t, root, secrets(t))
	for _, c := range []struct {
		name string
		env  []string
		want string
	}{
		{"a loopback address", []string{"NODE_IP=127.0.0.1"}, "is a loopback address"},
		{"TURN without its certificate", []string{"NODE_IP=" + netns.IP(), "TURN_DOMAIN=turn.test", "TURN_CERT_FILE=/nonexistent/fullchain.pem", "TURN_KEY_FILE=/nonexistent/privkey.pem"},
			"TURN over TLS for turn.test needs /nonexistent/fullchain.pem"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command("/bin/sh", "-c", script)
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, c.env...)
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), c.want) {
				t.Fatalf("exit %v, output %q; want a failure saying %q", err, out, c.want)
			}
		})
	}
}

// TestTLSProfile: Caddy with deploy/caddy/Caddyfile serves the operator's
// certificate for both names, redirects plain HTTP, and proxies to the
// gateway — with the client's address in X-Forwarded-For (a client's own
// header dropped), https in X-Forwarded-Proto and the Host kept, so the
// gateway, trusting the proxy, counts the client and not the proxy —
// WebSockets both ways and server-sent events as they are written; and to
// LiveKit, run by the compose file's entrypoint with TURN on: its
// signalling answers through the proxy, and its TURN server answers a STUN
// binding request over TLS with the operator's certificate.
func TestTLSProfile(t *testing.T) {
	netns.Require(t)
	root := repoRoot(t)
	caddy := devtools.Need(t, devtools.Caddy)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	certs := newPKI(t, "alicia.test", "voice.test", "turn.test")

	// The gateway stand-in: what it saw of each request, the client
	// address the gateway counts (trusting the proxy, on loopback here), a
	// WebSocket echo and an event stream written in two steps.
	proxies, err := gateway.ParseProxies("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	clientIP := gateway.ClientIP(proxies)
	second := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/seen", func(w http.ResponseWriter, r *http.Request) {
		e := echoFrame(r)
		e.ClientIP = clientIP(r)
		_ = json.NewEncoder(w).Encode(e)
	})
	mux.HandleFunc("/v1/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		defer c.CloseNow()
		typ, b, err := c.Read(r.Context())
		if err == nil {
			_ = c.Write(r.Context(), typ, append([]byte("echo: "), b...))
		}
		_, _, _ = c.Read(r.Context())
	})
	mux.HandleFunc("/timeline/stream", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-second:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "data: two\n\n")
	})
	gwLn := freeLocal(t)
	gw := &http.Server{Handler: mux}
	go gw.Serve(gwLn)
	t.Cleanup(func() { gw.Close() })

	// LiveKit as the compose file runs it, TURN over TLS on.
	script := livekitScript(t, root, secrets(t))
	lk := exec.Command("/bin/sh", "-c", script)
	lk.Env = []string{"PATH=" + os.Getenv("PATH"), "NODE_IP=" + netns.IP(), "TURN_DOMAIN=turn.test", "TURN_CERT_FILE=" + certs.cert, "TURN_KEY_FILE=" + certs.key}
	lkOut := start(t, lk)

	cy := exec.Command(caddy, "run", "--config", filepath.Join(root, "deploy", "caddy", "Caddyfile"), "--adapter", "caddyfile")
	home := t.TempDir()
	cy.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_DATA_HOME=" + filepath.Join(home, "data"), "XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
		"ALICIA_PUBLIC_HOST=alicia.test", "ALICIA_LIVEKIT_PUBLIC_HOST=voice.test",
		"ALICIA_TLS=" + certs.cert + " " + certs.key, "ALICIA_LIVEKIT_TLS=" + certs.cert + " " + certs.key,
		"ALICIA_GATEWAY_UPSTREAM=" + gwLn.Addr().String(), "ALICIA_LIVEKIT_UPSTREAM=127.0.0.1:7880"}
	cyOut := start(t, cy)

	hc := certs.client()
	get := func(url string) (*http.Response, []byte, error) {
		resp, err := hc.Get(url)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, b, err
	}
	testkit.EventuallyNoError(t, time.Minute, func() error {
		resp, _, err := get("https://alicia.test/seen")
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		return err
	}, "caddy serving https://alicia.test (log: %s)", cyOut)

	t.Run("the gateway sees the client", func(t *testing.T) {
		req, _ := http.NewRequest("GET", "https://alicia.test/seen", nil)
		req.Header.Set("X-Forwarded-For", "6.6.6.6")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e seen
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
			t.Fatal(err)
		}
		if e.Host != "alicia.test" || e.Proto != "https" || e.ClientIP != netns.PeerIP() || strings.Contains(e.XFF, "6.6.6.6") {
			t.Fatalf("the gateway saw %+v; want Host alicia.test, X-Forwarded-Proto https, the client %s counted, no client-written X-Forwarded-For", e, netns.PeerIP())
		}
		if resp.TLS == nil || len(resp.TLS.PeerCertificates) == 0 || resp.TLS.PeerCertificates[0].Subject.CommonName != "alicia.test" {
			t.Fatalf("served certificate %+v: want the operator's", resp.TLS)
		}
	})
	t.Run("plain HTTP is redirected", func(t *testing.T) {
		resp, _, err := get("http://alicia.test/v1/conversations")
		if err != nil {
			t.Fatal(err)
		}
		if loc := resp.Header.Get("Location"); resp.StatusCode/100 != 3 || loc != "https://alicia.test/v1/conversations" {
			t.Fatalf("http:// answered %d, Location %q", resp.StatusCode, loc)
		}
	})
	t.Run("WebSockets", func(t *testing.T) {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		c, _, err := websocket.Dial(wctx, "wss://alicia.test/v1/ws", &websocket.DialOptions{HTTPClient: hc})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		if err := c.Write(wctx, websocket.MessageBinary, []byte("hello")); err != nil {
			t.Fatal(err)
		}
		if _, b, err := c.Read(wctx); err != nil || string(b) != "echo: hello" {
			t.Fatalf("read %q, %v", b, err)
		}
	})
	t.Run("server-sent events as they are written", func(t *testing.T) {
		resp, err := hc.Get("https://alicia.test/timeline/stream")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		r := bufio.NewReader(resp.Body)
		// The second event is written only once the first arrived: a
		// buffering proxy would hold the first until the client timeout.
		if line, err := r.ReadString('\n'); err != nil || line != "data: one\n" {
			t.Fatalf("first event %q, %v", line, err)
		}
		close(second)
		_, _ = r.ReadString('\n')
		if line, err := r.ReadString('\n'); err != nil || line != "data: two\n" {
			t.Fatalf("second event %q, %v", line, err)
		}
	})
	t.Run("LiveKit's signalling through the proxy", func(t *testing.T) {
		testkit.EventuallyNoError(t, time.Minute, func() error {
			resp, body, err := get("https://voice.test/")
			if err == nil && (resp.StatusCode != http.StatusOK || resp.TLS.PeerCertificates[0].Subject.CommonName != "alicia.test") {
				err = fmt.Errorf("status %d %q", resp.StatusCode, body)
			}
			return err
		}, "livekit behind https://voice.test (log: %s)", lkOut)
	})
	t.Run("TURN over TLS", func(t *testing.T) {
		var conn *tls.Conn
		testkit.EventuallyNoError(t, time.Minute, func() error {
			var err error
			conn, err = tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", net.JoinHostPort(netns.IP(), "5349"),
				&tls.Config{ServerName: "turn.test", RootCAs: certs.pool})
			return err
		}, "livekit's TURN server on 5349 (log: %s)", lkOut)
		defer conn.Close()
		if err := stunBinding(conn); err != nil {
			t.Fatal(err)
		}
	})
}

// seen is what the gateway stand-in reports of a request.
type seen struct {
	Host, Proto, XFF, ClientIP string
}

func echoFrame(r *http.Request) seen {
	return seen{Host: r.Host, Proto: r.Header.Get("X-Forwarded-Proto"), XFF: r.Header.Get("X-Forwarded-For")}
}

// stunBinding sends a STUN Binding request (RFC 8489) on conn and checks
// the answer is its success response: a TURN server speaks STUN on its
// listeners.
func stunBinding(conn net.Conn) error {
	const magic = 0x2112A442
	req := make([]byte, 20)
	binary.BigEndian.PutUint16(req[0:], 0x0001) // Binding request
	binary.BigEndian.PutUint32(req[4:], magic)
	if _, err := rand.Read(req[8:20]); err != nil {
		return err
	}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(req); err != nil {
		return err
	}
	hdr := make([]byte, 20)
	if _, err := io.ReadFull(conn, hdr); err != nil {
		return fmt.Errorf("STUN answer: %w", err)
	}
	if typ := binary.BigEndian.Uint16(hdr[0:]); typ != 0x0101 || binary.BigEndian.Uint32(hdr[4:]) != magic || !bytes.Equal(hdr[8:20], req[8:20]) {
		return fmt.Errorf("STUN answer %x: want a Binding success response (0101) to transaction %x", hdr, req[8:20])
	}
	return nil
}
