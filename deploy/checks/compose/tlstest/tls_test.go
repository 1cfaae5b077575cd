// Package tlstest runs the compose file's tls profile for real, inside the
// package's own network namespace (pkg/testkit/netns; Caddy and LiveKit
// bind every interface of it, as in their containers): Caddy 2.11.4, built
// from its module, started by the compose file's own proxy entrypoint with
// deploy/caddy/Caddyfile, in front of a stand-in gateway and a real
// livekit-server started by the compose file's own livekit entrypoint —
// under one name with the operator's certificate (TURN over TLS on), and
// at a LAN address with Caddy's own CA, whose root the proxy serves.
package tlstest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
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
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/alicia-voice/alicia/deploy/checks/compose"
	"github.com/alicia-voice/alicia/pkg/devtools"
	"github.com/alicia-voice/alicia/pkg/livekitserver"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/lktest"
	"github.com/alicia-voice/alicia/pkg/testkit/netns"
	"github.com/alicia-voice/alicia/services/gateway"
)

func TestMain(m *testing.M) { netns.Main(m) }

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := compose.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// pki is a CA and, in dir, a certificate it signed for names, as an
// operator puts them in deploy/tls/: fullchain.pem and privkey.pem, and
// the CA's own certificate as ca.crt (mkcert's rootCA.pem, say).
type pki struct {
	pool          *x509.CertPool
	dir           string
	cert, key, ca string
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
	p.cert, p.key, p.ca = filepath.Join(p.dir, "fullchain.pem"), filepath.Join(p.dir, "privkey.pem"), filepath.Join(p.dir, "ca.crt")
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	chain := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), caPEM...)
	for path, b := range map[string][]byte{p.cert: chain, p.ca: caPEM, p.key: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// client reaches every name at the namespace's address, from its other
// address (so the proxy sees a client address that is not its own),
// trusting only roots, on a connection of its own.
func client(roots *x509.CertPool) *http.Client {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(netns.PeerIP())}, Timeout: 5 * time.Second}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		_, port, _ := net.SplitHostPort(addr)
		return dialer.DialContext(ctx, network, net.JoinHostPort(netns.IP(), port))
	}
	return &http.Client{
		Transport:     &http.Transport{DialContext: dial, TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       10 * time.Second,
	}
}

// get fetches url with c and reads the whole answer.
func get(c *http.Client, url string) (*http.Response, []byte, error) {
	resp, err := c.Get(url)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
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

// entrypoint is the script of a compose service's [/bin/sh -c <script>]
// entrypoint, with the container's paths replaced by the test's.
func entrypoint(t *testing.T, root, service string, paths *strings.Replacer) string {
	t.Helper()
	f, err := compose.Load(filepath.Join(root, "docker-compose.yml"), map[string]string{"ALICIA_LIVEKIT_NODE_IP": "192.0.2.10"})
	if err != nil {
		t.Fatal(err)
	}
	ep := f.Services[service].Entrypoint
	if len(ep) != 3 || ep[0] != "/bin/sh" || ep[1] != "-c" {
		t.Fatalf("%s entrypoint %q: want [/bin/sh -c <script>]", service, ep)
	}
	return paths.Replace(ep[2])
}

// livekitScript is the compose file's livekit entrypoint script, pointed
// at the test's files instead of the container's.
func livekitScript(t *testing.T, root, secrets string) string {
	t.Helper()
	bin := devtools.Need(t, devtools.LiveKit)
	return entrypoint(t, root, "livekit", strings.NewReplacer(
		"/livekit-server", bin,
		"/etc/livekit.yaml", filepath.Join(root, "deploy", "livekit.yaml"),
		"/tmp/livekit.yaml", filepath.Join(t.TempDir(), "livekit.yaml"),
		"/run/secrets/", secrets+"/",
	))
}

// credentials are LiveKit's API key and secret, in the secret files the
// livekit entrypoint reads (dir), and tokens they sign.
type credentials struct {
	dir string
	lk  lktest.Server
}

func secrets(t *testing.T) credentials {
	t.Helper()
	c := credentials{dir: t.TempDir(), lk: lktest.Server{APIKey: livekitserver.NewKey(), APISecret: livekitserver.NewSecret()}}
	for name, v := range map[string]string{"livekit_api_key": c.lk.APIKey, "livekit_api_secret": c.lk.APISecret} {
		if err := os.WriteFile(filepath.Join(c.dir, name), []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// TestLiveKitEntrypoint: the compose file's livekit entrypoint refuses a
// loopback NODE_IP, and TURN without its certificate, with a message.
func TestLiveKitEntrypoint(t *testing.T) {
	netns.Require(t)
	root := repoRoot(t)
	script := livekitScript(t, root, secrets(t).dir)
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

// TestProxyEntrypoint: the compose file's proxy entrypoint refuses to start
// without the one name.
func TestProxyEntrypoint(t *testing.T) {
	script := entrypoint(t, repoRoot(t), "proxy", strings.NewReplacer())
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "ALICIA_TLS=internal"}
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "set ALICIA_PUBLIC_HOST") {
		t.Fatalf("exit %v, output %q; want a failure naming ALICIA_PUBLIC_HOST", err, out)
	}
}

// TestCaddyfileFormatted: deploy/caddy/Caddyfile is as `caddy fmt` writes
// it (Caddy warns at every start otherwise).
func TestCaddyfileFormatted(t *testing.T) {
	caddy := devtools.Need(t, devtools.Caddy)
	out, err := exec.Command(caddy, "fmt", "--diff", filepath.Join(repoRoot(t), "deploy", "caddy", "Caddyfile")).CombinedOutput()
	if err != nil {
		t.Fatalf("caddy fmt --diff deploy/caddy/Caddyfile: %v\n%s", err, out)
	}
}

// standIn is the gateway stand-in: it reports what it saw of a request
// (and the client address the gateway counts, trusting the proxy, on
// loopback here), echoes a WebSocket, writes an event stream in two steps,
// counts the requests for /metrics that reach it, and answers every other
// path as itself.
type standIn struct {
	addr         string
	second       chan struct{}
	metricsCalls atomic.Int32
}

const standInBody = "the gateway stand-in"

func startGateway(t *testing.T) *standIn {
	t.Helper()
	proxies, err := gateway.ParseProxies("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	clientIP := gateway.ClientIP(proxies)
	g := &standIn{second: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, standInBody) })
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) { g.metricsCalls.Add(1) })
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
		case <-g.second:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "data: two\n\n")
	})
	ln := freeLocal(t)
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	g.addr = ln.Addr().String()
	return g
}

// seen is what the gateway stand-in reports of a request.
type seen struct {
	Host, Proto, XFF, ClientIP string
}

func echoFrame(r *http.Request) seen {
	return seen{Host: r.Host, Proto: r.Header.Get("X-Forwarded-Proto"), XFF: r.Header.Get("X-Forwarded-For")}
}

// startLiveKit runs livekit-server as the compose file does, with env
// (NODE_IP, TURN_*) besides PATH.
func startLiveKit(t *testing.T, root string, creds credentials, env ...string) *testkit.SyncBuffer {
	t.Helper()
	lk := exec.Command("/bin/sh", "-c", livekitScript(t, root, creds.dir))
	lk.Env = append([]string{"PATH=" + os.Getenv("PATH"), "NODE_IP=" + netns.IP()}, env...)
	return start(t, lk)
}

// proxy is Caddy started by the compose file's proxy entrypoint.
type proxy struct {
	out *testkit.SyncBuffer
	// dataHome is its XDG_DATA_HOME, the image's /data.
	dataHome string
}

// startProxy runs the compose file's proxy entrypoint with Caddy built at
// the image's version, deploy/caddy/Caddyfile, tlsDir as deploy/tls and a
// data directory of its own, with env (ALICIA_PUBLIC_HOST, ALICIA_TLS)
// besides the upstreams: the stand-in and LiveKit on this namespace.
func startProxy(t *testing.T, root, tlsDir string, g *standIn, env ...string) proxy {
	t.Helper()
	caddy := devtools.Need(t, devtools.Caddy)
	home := t.TempDir()
	p := proxy{dataHome: filepath.Join(home, "data")}
	script := entrypoint(t, root, "proxy", strings.NewReplacer(
		"exec caddy run", "exec "+caddy+" run",
		"/etc/caddy/Caddyfile", filepath.Join(root, "deploy", "caddy", "Caddyfile"),
		"/etc/caddy/tls/", tlsDir+"/",
		"/data/", p.dataHome+"/",
	))
	if !strings.Contains(script, caddy+" run") {
		t.Fatalf("the proxy entrypoint does not exec caddy run:\n%s", script)
	}
	cy := exec.Command("/bin/sh", "-c", script)
	cy.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_DATA_HOME=" + p.dataHome, "XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
		"ALICIA_GATEWAY_UPSTREAM=" + g.addr, "ALICIA_LIVEKIT_UPSTREAM=127.0.0.1:7880"}, env...)
	p.out = start(t, cy)
	return p
}
