// Package netns runs a test package inside a network namespace of its own,
// for WebRTC tests: pion (and Chromium) offer no loopback ICE candidates, so
// the livekit-server and every client of a test need a non-loopback address
// that belongs to the test alone.
//
// A package's TestMain calls Main:
//
//	func TestMain(m *testing.M) { netns.Main(m) }
//
// Main re-executes the test binary (/proc/self/exe, same arguments) in a new
// network namespace (what `unshare --net` does; as root, else inside a new
// user namespace where the kernel allows one), passing stdin, stdout, stderr,
// signals and the exit code through. Inside, it brings lo up and creates a
// veth pair with 10.213.0.1/24 and 10.213.0.2/24 (IP and PeerIP), both ends
// up, then runs the tests. 127.0.0.1 is the namespace's own loopback: the
// host's listeners are unreachable, and embedded servers (natstest) bound
// there belong to the test.
//
// Postgres: before re-executing, the parent resolves the server (localpg:
// ALICIA_POSTGRES_URL, else the private cluster) and hands the child
// ALICIA_POSTGRES_URL in unix-socket form (postgres://…@/db?host=<dir>&port=N),
// since unix sockets are not tied to a network namespace. The private
// cluster's own socket is used; a TCP server given in ALICIA_POSTGRES_URL is
// relayed through a socket the parent serves. pgtest then works as usual.
//
// When the namespace cannot be made (no privilege, no ip command), the tests
// run in the parent and Require skips those that need it with the reason,
// or fails them under CI=true.
package netns

import (
	"fmt"
	"os"
	"testing"

	"github.com/alicia-voice/alicia/pkg/testkit"
)

// Addresses of the veth pair inside the namespace (a private /24 that only
// exists there).
const (
	hostIP = "10.213.0.1"
	peerIP = "10.213.0.2"
	// Interface names of the pair.
	hostIf = "alicia0"
	peerIf = "alicia1"
)

// envInside marks the re-executed child.
const envInside = "ALICIA_NETNS"

// state is this process's: inside a prepared namespace, or why not.
var state struct {
	inside bool
	reason string
}

// Main runs the package's tests inside a network namespace of their own (see
// the package documentation) and exits with their exit code. It does not
// return.
func Main(m *testing.M) {
	if os.Getenv(envInside) == "1" {
		if err := setup(); err != nil {
			state.reason = "setting up the network namespace failed: " + err.Error()
		} else {
			state.inside = true
		}
		os.Exit(m.Run())
	}
	code, err := reexec()
	if err != nil {
		state.reason = err.Error()
		fmt.Fprintf(os.Stderr, "netns: no network namespace, tests that need one are skipped (failed under CI=true): %v\n", err)
		os.Exit(m.Run())
	}
	os.Exit(code)
}

// Inside reports whether the tests run in a prepared network namespace.
func Inside() bool { return state.inside }

// IP is the namespace's non-loopback address for servers and clients
// (10.213.0.1), or "" when not Inside.
func IP() string {
	if !state.inside {
		return ""
	}
	return hostIP
}

// PeerIP is the other end of the veth pair (10.213.0.2), also local to the
// namespace: a second address when a test wants two hosts. "" when not
// Inside.
func PeerIP() string {
	if !state.inside {
		return ""
	}
	return peerIP
}

// Require stops t unless the tests run inside the namespace: a skip with
// the reason, or a failure under CI=true.
func Require(t testing.TB) {
	t.Helper()
	if state.inside {
		return
	}
	reason := state.reason
	if reason == "" {
		reason = "the package's TestMain does not call netns.Main"
	}
	msg := "netns: this test needs its own network namespace (root, or unprivileged user namespaces, and the ip command of iproute2): " + reason
	testkit.Missing(t, "%s", msg)
}
