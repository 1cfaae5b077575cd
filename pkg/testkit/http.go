package testkit

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// FreeAddr returns a 127.0.0.1 address with a port nothing listens on now,
// for a server the test starts by address (a metrics or NATS address). The
// port is below the kernel's ephemeral range, so a server that listens on
// port 0 in the meantime (an embedded NATS, an httptest server) is never
// handed the same one, and no port is handed out twice in a process.
func FreeAddr(t testing.TB) string {
	t.Helper()
	lo, hi := 10000, ephemeralLow()-1
	freeMu.Lock()
	defer freeMu.Unlock()
	for range 200 {
		port := lo + rand.IntN(hi-lo+1)
		if handedOut[port] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		ln.Close()
		handedOut[port] = true
		return ln.Addr().String()
	}
	t.Fatal("testkit: no free port below the ephemeral range")
	return ""
}

var (
	freeMu    sync.Mutex
	handedOut = map[int]bool{}
)

// ephemeralLow is the first port of the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range; 32768 when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n <= 11000 {
		return 32768
	}
	return n
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
