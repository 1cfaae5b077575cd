package jaeger_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/jaeger"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/jaegertest"
)

// TestStart runs the Jaeger binary: it is healthy, listens on 127.0.0.1
// alone, keeps a span sent over OTLP/HTTP and serves it on its query API,
// and is gone after Stop.
func TestStart(t *testing.T) {
	bin := jaegertest.Binary(t)
	dir := t.TempDir()
	s, err := jaeger.Start(context.Background(), jaeger.Options{Bin: bin, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if s.LogPath != filepath.Join(dir, "jaeger.log") || !strings.HasPrefix(s.UIURL, "http://127.0.0.1:") || !strings.HasPrefix(s.OTLPHTTPURL, "http://127.0.0.1:") {
		t.Fatalf("server %+v", s)
	}
	listening, err := listeningAddrs(s.PID())
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]bool{s.UIPort: true, s.OTLPGRPCPort: true, s.OTLPHTTPPort: true, s.QueryGRPCPort: true, s.HealthPort: true}
	for _, a := range listening {
		if !a.IP.Equal(net.IPv4(127, 0, 0, 1)) || !want[a.Port] {
			t.Errorf("jaeger listens on %s: want only its five ports on 127.0.0.1 (%v)", a, want)
		}
		delete(want, a.Port)
	}
	if len(want) != 0 {
		t.Errorf("jaeger does not listen on %v: listening %v", want, listening)
	}

	traceID, spanID := "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174"
	now := time.Now()
	body := fmt.Sprintf(`{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"jaeger-test"}}]},
		"scopeSpans":[{"spans":[{"traceId":%q,"spanId":%q,"name":"test.span","kind":1,
		"startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":[{"key":"k","value":{"stringValue":"v"}}]}]}]}]}`,
		traceID, spanID, now.UnixNano(), now.Add(time.Millisecond).UnixNano())
	resp, err := http.Post(s.OTLPHTTPURL+"/v1/traces", "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("OTLP export: %s", resp.Status)
	}
	var tr jaegertest.Trace
	testkit.EventuallyNoError(t, 10*time.Second, func() error {
		tr, err = jaegertest.GetTrace(context.Background(), s.UIURL, traceID)
		return err
	}, "the span in Jaeger")
	if len(tr.Spans) != 1 || tr.Spans[0].OperationName != "test.span" || tr.Spans[0].SpanID != spanID || tr.Spans[0].Tag("k") != "v" ||
		tr.Processes[tr.Spans[0].ProcessID].ServiceName != "jaeger-test" {
		t.Fatalf("trace %+v", tr)
	}
	// The API v3 serves it too (OTLP JSON).
	resp, err = http.Get(s.UIURL + "/api/v3/traces/" + traceID)
	if err != nil {
		t.Fatal(err)
	}
	v3, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(v3, []byte(`"test.span"`)) {
		t.Fatalf("GET /api/v3/traces/%s: %s %s", traceID, resp.Status, v3)
	}
	found, err := jaegertest.FindTraces(context.Background(), s.UIURL, "jaeger-test", 10)
	if err != nil || len(found) != 1 || found[0].TraceID != traceID {
		t.Fatalf("find traces of jaeger-test: %+v %v", found, err)
	}
	// The page is the embedded trace viewer (TestUIInBrowser drives it).
	if page := get(t, s.UIURL+"/", "text/html"); !s.EmbeddedUI || !strings.Contains(page, "<title>Traces · Alicia</title>") {
		t.Fatalf("UI page (embedded %v):\n%s", s.EmbeddedUI, page)
	}

	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	default:
		t.Fatal("jaeger still runs after Stop")
	}
	if _, err := http.Get(s.UIURL + "/"); err == nil {
		t.Fatal("the UI still answers after Stop")
	}
}

// TestPortInUse: a fixed port another process holds is reported as such,
// before anything is started.
func TestPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = jaeger.Start(context.Background(), jaeger.Options{Bin: "/nonexistent/jaeger", UIPort: l.Addr().(*net.TCPAddr).Port})
	if !errors.Is(err, jaeger.ErrPortInUse) || !strings.Contains(err.Error(), l.Addr().String()) {
		t.Fatalf("Start = %v, want ErrPortInUse naming %s", err, l.Addr())
	}
}

// TestFind: ALICIA_JAEGER_BIN wins and must be executable.
func TestFind(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "jaeger")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(jaeger.EnvBin, bin)
	if p, err := jaeger.Find(); err != nil || p != bin {
		t.Fatalf("Find = %q, %v; want %s", p, err, bin)
	}
	t.Setenv(jaeger.EnvBin, filepath.Join(dir, "missing"))
	if _, err := jaeger.Find(); err == nil {
		t.Fatal("Find accepted a missing ALICIA_JAEGER_BIN")
	}
	t.Setenv(jaeger.EnvBin, "")
	t.Setenv("ALICIA_CACHE_DIR", dir)
	if _, err := jaeger.Find(); !errors.Is(err, jaeger.ErrNotInstalled) {
		t.Fatalf("Find in an empty cache = %v, want ErrNotInstalled", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	cached := filepath.Join(dir, "bin", jaeger.BinaryName)
	if err := os.WriteFile(cached, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if p, err := jaeger.Find(); err != nil || p != cached {
		t.Fatalf("Find = %q, %v; want the cached %s", p, err, cached)
	}
}

// listeningAddrs returns the TCP addresses process pid listens on: its
// socket inodes (/proc/pid/fd) matched with the listening sockets of
// /proc/pid/net/tcp and tcp6.
func listeningAddrs(pid int) ([]*net.TCPAddr, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	var out []*net.TCPAddr
	for _, f := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, f))
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) < 10 || fields[3] != "0A" || !inodes[fields[9]] { // 0A: LISTEN
				continue
			}
			a, err := parseProcAddr(fields[1])
			if err != nil {
				return nil, err
			}
			out = append(out, a)
		}
	}
	return out, nil
}

// parseProcAddr parses /proc/net/tcp's "0100007F:1F90": the address as
// 32-bit words in host (little-endian) order, the port in hex.
func parseProcAddr(s string) (*net.TCPAddr, error) {
	h, p, ok := strings.Cut(s, ":")
	raw, err := hex.DecodeString(h)
	if !ok || err != nil || len(raw)%4 != 0 {
		return nil, fmt.Errorf("address %q", s)
	}
	ip := make(net.IP, len(raw))
	for i := 0; i < len(raw); i += 4 {
		ip[i], ip[i+1], ip[i+2], ip[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return nil, fmt.Errorf("port %q", s)
	}
	return &net.TCPAddr{IP: ip, Port: int(port)}, nil
}
