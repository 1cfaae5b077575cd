package testkit

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// FreeAddr returns a 127.0.0.1 address with a port nothing listens on now,
// for a server the test starts by address (a metrics or NATS address).
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Answers returns a check for EventuallyNoError: GET url answers status
// with a body containing body.
func Answers(url string, status int, body string) func() error {
	return func() error {
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != status || !strings.Contains(string(b), body) {
			return fmt.Errorf("GET %s: %d %q, want %d with %q", url, resp.StatusCode, b, status, body)
		}
		return nil
	}
}
