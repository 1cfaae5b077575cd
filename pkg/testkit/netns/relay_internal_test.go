package netns

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestRelayForwardsBothWays: a unix socket named like Postgres's reaches a
// TCP server (what a test in the namespace gets when ALICIA_POSTGRES_URL
// names a TCP server).
func TestRelayForwardsBothWays(t *testing.T) {
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		for {
			c, err := srv.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }() // echo until the client closes
		}
	}()
	r, err := startRelay(srv.Addr().String(), "5999")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(r.dir, ".s.PGSQL.5999")
	for i := range 2 { // two connections in turn
		c, err := net.DialTimeout("unix", sock, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		msg := []byte("startup message " + string(rune('a'+i)))
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		c.(*net.UnixConn).CloseWrite()
		got, err := io.ReadAll(c)
		if err != nil || string(got) != string(msg) {
			t.Fatalf("echo through the relay = %q, %v; want %q", got, err, msg)
		}
		c.Close()
	}
	r.stop()
	if _, err := os.Stat(r.dir); !os.IsNotExist(err) {
		t.Fatalf("relay dir left behind: %v", err)
	}
	if _, err := net.DialTimeout("unix", sock, time.Second); err == nil {
		t.Fatal("the relay still accepts after stop")
	}
}
