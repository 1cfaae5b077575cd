package tlstest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/netns"
)

// TestTLSProfile: the proxy, with the operator's certificate for one name,
// serves the page and LiveKit's signalling under that name with that one
// certificate: /rtc and the paths under it (what the livekit-client SDK
// asks: the signalling WebSocket, /rtc/validate, /rtc/v1/validate) reach
// livekit-server, run by the compose file's entrypoint with TURN on,
// everything else the gateway — with the client's address in
// X-Forwarded-For (a client's own header dropped), https in
// X-Forwarded-Proto and the Host kept, so the gateway, trusting the proxy,
// counts the client and not the proxy — WebSockets both ways and
// server-sent events as they are written. Plain HTTP is redirected, the
// gateway's /metrics is not served, the operator's CA is served at
// /alicia-ca.crt, and LiveKit's TURN server answers a STUN binding request
// over TLS with the operator's certificate.
func TestTLSProfile(t *testing.T) {
	netns.Require(t)
	root := repoRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	certs := newPKI(t, "alicia.test", "turn.test")
	creds := secrets(t)
	g := startGateway(t)
	lkOut := startLiveKit(t, root, creds, "TURN_DOMAIN=turn.test", "TURN_CERT_FILE="+certs.cert, "TURN_KEY_FILE="+certs.key)
	px := startProxy(t, root, certs.dir, g, "ALICIA_PUBLIC_HOST=alicia.test", "ALICIA_TLS="+certs.cert+" "+certs.key)

	hc := client(certs.pool)
	testkit.EventuallyNoError(t, time.Minute, func() error {
		resp, _, err := get(hc, "https://alicia.test/seen")
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		return err
	}, "caddy serving https://alicia.test (log: %s)", px.out)
	token := creds.lk.Token(t, "conv_tls", "user-1")
	testkit.EventuallyNoError(t, time.Minute, func() error {
		resp, body, err := get(hc, "https://alicia.test/rtc/validate?access_token="+token)
		if err == nil && (resp.StatusCode != http.StatusOK || string(body) != "success") {
			err = fmt.Errorf("status %d %q", resp.StatusCode, body)
		}
		return err
	}, "livekit behind https://alicia.test/rtc (log: %s)", lkOut)

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
	})
	t.Run("page and signalling under one name and one certificate", func(t *testing.T) {
		// Each request on a connection of its own: each handshake shows
		// the certificate the proxy serves for that path's name.
		var served [][]byte
		for _, c := range []struct {
			path       string
			status     int
			body, from string
		}{
			{"/", http.StatusOK, standInBody, "the gateway"},
			{"/conversations/abc", http.StatusOK, standInBody, "the gateway"},
			{"/rtc/validate?access_token=" + token, http.StatusOK, "success", "livekit-server"},
			// Without a token livekit-server refuses, where the stand-in would answer.
			{"/rtc/validate", http.StatusUnauthorized, "", "livekit-server"},
			// The v1 signalling's validation wants a join request: livekit-server's answer.
			{"/rtc/v1/validate?access_token=" + token, http.StatusBadRequest, "join_request is required", "livekit-server"},
		} {
			resp, body, err := get(client(certs.pool), "https://alicia.test"+c.path)
			if err != nil {
				t.Fatalf("GET %s: %v", c.path, err)
			}
			if resp.StatusCode != c.status || !strings.Contains(string(body), c.body) || (c.from != "the gateway" && strings.Contains(string(body), standInBody)) {
				t.Errorf("GET https://alicia.test%s: %d %q; want %d %q from %s", strings.SplitN(c.path, "?", 2)[0], resp.StatusCode, body, c.status, c.body, c.from)
			}
			served = append(served, resp.TLS.PeerCertificates[0].Raw)
		}
		for _, raw := range served[1:] {
			if !bytes.Equal(raw, served[0]) {
				t.Fatal("the page and the signalling were served with different certificates")
			}
		}
		if leaf, _ := x509.ParseCertificate(served[0]); leaf == nil || leaf.VerifyHostname("alicia.test") != nil {
			t.Fatalf("served certificate %v: want the operator's, for alicia.test", leaf)
		}
	})
	t.Run("LiveKit's signalling WebSocket on the page's name", func(t *testing.T) {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		c, resp, err := websocket.Dial(wctx, "wss://alicia.test/rtc?protocol=15&auto_subscribe=1&access_token="+token, &websocket.DialOptions{HTTPClient: hc})
		if err != nil {
			t.Fatalf("%v (response %+v; livekit log: %s)", err, resp, lkOut)
		}
		defer c.CloseNow()
		// livekit-server's first signal is the join response (a protobuf).
		typ, b, err := c.Read(wctx)
		if err != nil || typ != websocket.MessageBinary || len(b) == 0 {
			t.Fatalf("first signal: %v, %d bytes, %v; want livekit-server's join response", typ, len(b), err)
		}
	})
	t.Run("plain HTTP is redirected", func(t *testing.T) {
		resp, _, err := get(hc, "http://alicia.test/v1/conversations")
		if err != nil {
			t.Fatal(err)
		}
		if loc := resp.Header.Get("Location"); resp.StatusCode/100 != 3 || loc != "https://alicia.test/v1/conversations" {
			t.Fatalf("http:// answered %d, Location %q", resp.StatusCode, loc)
		}
	})
	t.Run("the gateway's /metrics is not served", func(t *testing.T) {
		resp, _, err := get(hc, "https://alicia.test/metrics")
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusNotFound || g.metricsCalls.Load() != 0 {
			t.Fatalf("https://alicia.test/metrics answered %d, the gateway got %d requests for it; want 404 from the proxy", resp.StatusCode, g.metricsCalls.Load())
		}
	})
	t.Run("the operator's CA at /alicia-ca.crt", func(t *testing.T) {
		want, err := os.ReadFile(certs.ca)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range []string{"http://alicia.test/alicia-ca.crt", "https://alicia.test/alicia-ca.crt"} {
			resp, body, err := get(hc, u)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-x509-ca-cert" || !bytes.Equal(body, want) {
				t.Fatalf("%s: %d %s, %d bytes; want deploy/tls/ca.crt as application/x-x509-ca-cert", u, resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
			}
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
		close(g.second)
		_, _ = r.ReadString('\n')
		if line, err := r.ReadString('\n'); err != nil || line != "data: two\n" {
			t.Fatalf("second event %q, %v", line, err)
		}
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

// TestLANInternalCA: deploy/README.md's LAN path as written. The one name
// is this host's address, the certificate Caddy's own CA's
// (ALICIA_TLS=internal). A client that trusts nothing yet fetches the root
// over plain HTTP at /alicia-ca.crt — exactly the file Caddy keeps under
// its data directory, caddy/pki/authorities/local/root.crt — and, trusting
// it, reaches the page and LiveKit's signalling at https://<address>/
// without sending a server name (a browser sends none for an address).
func TestLANInternalCA(t *testing.T) {
	netns.Require(t)
	root := repoRoot(t)
	creds := secrets(t)
	g := startGateway(t)
	lkOut := startLiveKit(t, root, creds)
	px := startProxy(t, root, t.TempDir(), g, "ALICIA_PUBLIC_HOST="+netns.IP(), "ALICIA_TLS=internal")
	base := "://" + netns.IP()

	var rootPEM []byte
	plain := client(x509.NewCertPool())
	testkit.EventuallyNoError(t, time.Minute, func() error {
		resp, body, err := get(plain, "http"+base+"/alicia-ca.crt")
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		rootPEM = body
		return err
	}, "caddy serving its CA's root at http%s/alicia-ca.crt (log: %s)", base, px.out)
	onDisk, err := os.ReadFile(filepath.Join(px.dataHome, "caddy", "pki", "authorities", "local", "root.crt"))
	if err != nil {
		t.Fatalf("Caddy's root is not where deploy/README.md says: %v", err)
	}
	if !bytes.Equal(rootPEM, onDisk) {
		t.Fatal("/alicia-ca.crt is not the root Caddy keeps in its data directory")
	}
	block, _ := pem.Decode(rootPEM)
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil || !ca.IsCA {
		t.Fatalf("/alicia-ca.crt: %v (CA %v); want a CA certificate", err, ca != nil && ca.IsCA)
	}

	roots := x509.NewCertPool()
	roots.AddCert(ca)
	testkit.EventuallyNoError(t, time.Minute, func() error {
		resp, body, err := get(client(roots), "https"+base+"/")
		if err == nil && string(body) != standInBody {
			err = fmt.Errorf("status %d %q", resp.StatusCode, body)
		}
		return err
	}, "the page at https%s/ (log: %s)", base, px.out)
	if _, _, err := get(plain, "https"+base+"/"); !errors.As(err, new(*tls.CertificateVerificationError)) {
		t.Fatalf("a client without the root: %v; want the certificate refused", err)
	}
	token := creds.lk.Token(t, "conv_lan", "user-1")
	var leaf *x509.Certificate
	testkit.EventuallyNoError(t, time.Minute, func() error {
		resp, body, err := get(client(roots), "https"+base+"/rtc/validate?access_token="+token)
		if err == nil && (resp.StatusCode != http.StatusOK || string(body) != "success") {
			err = fmt.Errorf("status %d %q", resp.StatusCode, body)
		}
		if err == nil {
			leaf = resp.TLS.PeerCertificates[0]
		}
		return err
	}, "LiveKit's signalling at https%s/rtc/validate (livekit log: %s)", base, lkOut)
	if len(leaf.IPAddresses) != 1 || !leaf.IPAddresses[0].Equal(net.ParseIP(netns.IP())) {
		t.Fatalf("served certificate for %v; want one for %s", leaf.IPAddresses, netns.IP())
	}
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
