package gateway_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/services/gateway"
)

// closedByServer reports whether the server closes c within wait.
func closedByServer(t *testing.T, c net.Conn, wait time.Duration) bool {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(wait))
	_, err := io.Copy(io.Discard, c)
	if err == nil || errors.Is(err, io.EOF) {
		return true // EOF: the server closed it
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	return true // reset by the server
}

// TestHTTPTimeouts: a request whose body never comes and a keep-alive
// connection left idle are closed by the server (each would otherwise hold
// a connection and a goroutine for as long as the client likes).
func TestHTTPTimeouts(t *testing.T) {
	s := newStack(t, func(o *stackOptions) {
		o.gateway = func(c *gateway.Config) {
			c.HTTPReadTimeout, c.HTTPIdleTimeout = 300*time.Millisecond, 300*time.Millisecond
		}
	})
	addr := strings.TrimPrefix(s.base, "http://")

	t.Run("body never sent", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "POST /v1/conversations HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+aliceKey+
			"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"); err != nil {
			t.Fatal(err)
		}
		if !closedByServer(t, c, 5*time.Second) {
			t.Fatal("the server waits for a body that never comes")
		}
	})

	t.Run("idle keep-alive connection", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Close {
			t.Fatalf("healthz: %d, close %v", resp.StatusCode, resp.Close)
		}
		if !closedByServer(t, c, 5*time.Second) {
			t.Fatal("an idle keep-alive connection stays open")
		}
	})
}
