package netns

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/pkg/testkit"
)

// setup prepares the fresh namespace: lo up, the veth pair with its two
// addresses, both ends up. A namespace already prepared (a test binary run
// from inside one) is taken as it is.
func setup() error {
	if ready() == nil {
		return nil
	}
	ipCmd, err := exec.LookPath("ip")
	if err != nil {
		return errors.New("the ip command (iproute2) is not installed")
	}
	steps := [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", hostIf, "type", "veth", "peer", "name", peerIf},
		{"addr", "add", hostIP + "/24", "dev", hostIf},
		{"addr", "add", peerIP + "/24", "dev", peerIf},
		{"link", "set", hostIf, "up"},
		{"link", "set", peerIf, "up"},
	}
	for _, args := range steps {
		if out, err := exec.Command(ipCmd, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	// Only the IPv4 addresses: no IPv6 link-local candidates for ICE to try.
	for _, ifc := range []string{hostIf, peerIf} {
		_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+ifc+"/disable_ipv6", []byte("1"), 0o644)
	}
	// The kernel brings the pair up by itself.
	return testkit.CheckFor(5*time.Second, testkit.PollInterval, ready)
}

// ready checks that lo and both veth ends are up with their addresses.
func ready() error {
	for _, want := range []struct{ name, ip string }{{"lo", "127.0.0.1"}, {hostIf, hostIP}, {peerIf, peerIP}} {
		ifc, err := net.InterfaceByName(want.name)
		if err != nil {
			return fmt.Errorf("interface %s: %w", want.name, err)
		}
		if ifc.Flags&net.FlagUp == 0 || (want.name != "lo" && ifc.Flags&net.FlagRunning == 0) {
			return fmt.Errorf("interface %s is not up (%s)", want.name, ifc.Flags)
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			return fmt.Errorf("interface %s: %w", want.name, err)
		}
		found := false
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.String() == want.ip {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("interface %s has no address %s", want.name, want.ip)
		}
	}
	return nil
}
