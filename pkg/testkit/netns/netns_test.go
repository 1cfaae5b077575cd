package netns_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/alicia-voice/alicia/pkg/localpg"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/netns"
	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
)

func TestMain(m *testing.M) { netns.Main(m) }

// envHelper makes TestHelperExit (run by TestExitCodeAndOutputPassThrough
// in a nested namespace) exit as it says.
const envHelper = "NETNS_TEST_HELPER"

func TestAddressIsOnAnUpInterface(t *testing.T) {
	netns.Require(t)
	if netns.IP() == "" || netns.PeerIP() == "" || netns.IP() == netns.PeerIP() {
		t.Fatalf("IP %q, PeerIP %q", netns.IP(), netns.PeerIP())
	}
	for _, want := range []string{netns.IP(), netns.PeerIP()} {
		ip := net.ParseIP(want)
		if ip == nil || ip.IsLoopback() || !ip.IsPrivate() {
			t.Fatalf("%s is not a private non-loopback address", want)
		}
		ifc := interfaceWith(t, ip)
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagRunning == 0 || ifc.Flags&net.FlagLoopback != 0 {
			t.Fatalf("%s is on %s with flags %s, want an up, running, non-loopback interface", want, ifc.Name, ifc.Flags)
		}
	}
	// Servers bound to IP are reached from PeerIP: two hosts on one link.
	ln, err := net.Listen("tcp", net.JoinHostPort(netns.IP(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Write([]byte("hi"))
			c.Close()
		}
	}()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(netns.PeerIP())}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 2)
	if _, err := c.Read(buf); err != nil || string(buf) != "hi" {
		t.Fatalf("read %q, %v", buf, err)
	}
	// UDP too (ICE).
	pc, err := net.ListenPacket("udp", net.JoinHostPort(netns.IP(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	uc, err := net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP(netns.PeerIP())}, pc.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	if _, err := uc.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	pc.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, from, err := pc.ReadFrom(buf[:])
	if err != nil || from.(*net.UDPAddr).IP.String() != netns.PeerIP() {
		t.Fatalf("UDP read %d from %v: %v", n, from, err)
	}
}

func interfaceWith(t *testing.T, ip net.IP) net.Interface {
	t.Helper()
	ifcs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, ifc := range ifcs {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
				return ifc
			}
		}
	}
	t.Fatalf("no interface has %s", ip)
	return net.Interface{}
}

// listenInParentNamespace opens a TCP listener on 127.0.0.1 in the network
// namespace of the process that started this one (the host's), from a
// thread that visits it.
func listenInParentNamespace(t *testing.T) net.Listener {
	t.Helper()
	parent, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", os.Getppid()))
	if errors.Is(err, os.ErrPermission) {
		testkit.Missing(t, "cannot open the parent's network namespace (an unprivileged user namespace): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Close()
	own, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	var sameNS bool
	if a, b := inode(t, parent), inode(t, own); a == b {
		sameNS = true
	}
	if sameNS {
		t.Fatal("the test runs in its parent's network namespace")
	}
	runtime.LockOSThread() // not unlocked when returning to our namespace fails: the thread is then discarded
	if err := unix.Setns(int(parent.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		testkit.Missing(t, "cannot visit the parent's namespace (%v)", err)
	}
	ln, lerr := net.Listen("tcp", "127.0.0.1:0")
	if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err != nil {
		t.Fatalf("back to our namespace: %v", err)
	}
	runtime.UnlockOSThread()
	if lerr != nil {
		t.Fatal(lerr)
	}
	return ln
}

func inode(t *testing.T, f *os.File) uint64 {
	t.Helper()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func TestLoopbackIsTheNamespacesOwn(t *testing.T) {
	netns.Require(t)
	host := listenInParentNamespace(t)
	defer host.Close()
	// The host's listener is not reachable at its address from here.
	c, err := net.DialTimeout("tcp", host.Addr().String(), 2*time.Second)
	if err == nil {
		c.Close()
		t.Fatalf("dialled the host's %s from inside the namespace", host.Addr())
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial the host's listener: %v, want connection refused", err)
	}
	// lo is up: a listener of our own on 127.0.0.1 answers.
	own, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	go func() {
		if c, err := own.Accept(); err == nil {
			c.Close()
		}
	}()
	c, err = net.DialTimeout("tcp", own.Addr().String(), 2*time.Second)
	if err != nil {
		t.Fatalf("own loopback: %v", err)
	}
	c.Close()
}

func TestPostgresThroughTheSocket(t *testing.T) {
	netns.Require(t)
	u, err := url.Parse(os.Getenv(localpg.EnvURL))
	if err != nil {
		t.Fatal(err)
	}
	if u.Host != "" || !strings.HasPrefix(u.Query().Get("host"), "/") {
		t.Fatalf("%s = %s, want the unix-socket form", localpg.EnvURL, u.Redacted())
	}
	pool := pgtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM alicia_conversations").Scan(&n); err != nil || n != 0 {
		t.Fatalf("migrated test database: count = %d, %v", n, err)
	}
}

// TestHelperExit is run by TestExitCodeAndOutputPassThrough only.
func TestHelperExit(t *testing.T) {
	mode := os.Getenv(envHelper)
	if mode == "" {
		t.Skip("helper of TestExitCodeAndOutputPassThrough")
	}
	fmt.Println("helper inside:", netns.Inside())
	if mode == "fail" {
		t.Fatal("helper fails on purpose")
	}
}

// TestExitCodeAndOutputPassThrough runs this test binary again with the
// marker cleared, so Main makes a nested namespace and re-executes once
// more: the innermost process's output and exit code must reach us.
func TestExitCodeAndOutputPassThrough(t *testing.T) {
	netns.Require(t)
	for _, tt := range []struct {
		mode     string
		wantCode int
		wantOut  string
	}{
		{"pass", 0, "helper inside: true"},
		{"fail", 1, "helper fails on purpose"},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperExit$", "-test.v", "-test.count=1")
			cmd.Env = append(withoutMarker(), envHelper+"="+tt.mode)
			out, err := cmd.CombinedOutput()
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.wantCode || !strings.Contains(string(out), tt.wantOut) {
				t.Fatalf("exit %d, output:\n%s\nwant exit %d and %q", code, out, tt.wantCode, tt.wantOut)
			}
		})
	}
}

func withoutMarker() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ALICIA_NETNS=") {
			env = append(env, kv)
		}
	}
	return env
}
