package lan

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/alicia-voice/alicia/pkg/testkit/netns"
)

func TestMain(m *testing.M) { netns.Main(m) }

func ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %v: %v: %s", args, err, out)
	}
}

// TestAddresses, in the test's own network namespace: the veth pair's
// private addresses are found, the default route's interface first;
// loopback, a container bridge and a public address are not.
func TestAddresses(t *testing.T) {
	netns.Require(t)
	// veth pairs (the kernel may lack the dummy type); the peers hold no
	// address.
	for _, pair := range [][2]string{{"docker0", "dockerpeer"}, {"uplink", "uplinkpeer"}} {
		ip(t, "link", "add", pair[0], "type", "veth", "peer", "name", pair[1])
		ip(t, "link", "set", pair[0], "up")
		ip(t, "link", "set", pair[1], "up")
	}
	ip(t, "addr", "add", "172.17.0.1/16", "dev", "docker0")
	ip(t, "addr", "add", "192.0.2.7/24", "dev", "uplink") // TEST-NET-1: not private
	ip(t, "addr", "add", "192.168.77.2/24", "dev", "uplink")
	ip(t, "route", "add", "default", "via", "192.168.77.1", "dev", "uplink")

	got, err := Addresses()
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	for _, a := range got {
		ips = append(ips, a.IP.String()+"@"+a.Interface)
	}
	want := []string{"192.168.77.2@uplink", netns.IP() + "@alicia0", netns.PeerIP() + "@alicia1"}
	if len(ips) != len(want) {
		t.Fatalf("addresses %v, want %v", ips, want)
	}
	if ips[0] != want[0] || !got[0].Default {
		t.Fatalf("first address %v, want the default route's %s", got[0], want[0])
	}
	for _, w := range want[1:] {
		found := false
		for _, g := range ips[1:] {
			found = found || g == w
		}
		if !found {
			t.Errorf("addresses %v lack %s", ips, w)
		}
	}
}

func TestDefaultRouteInterface(t *testing.T) {
	p := filepath.Join(t.TempDir(), "route")
	table := "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
		"eth1\t0000A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n" +
		"wlan0\t00000000\t0101A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0\n"
	if err := os.WriteFile(p, []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := defaultRouteInterface(p); got != "wlan0" {
		t.Fatalf("default route interface %q, want wlan0", got)
	}
	if got := defaultRouteInterface(filepath.Join(t.TempDir(), "none")); got != "" {
		t.Fatalf("no table: %q", got)
	}
}

func TestVirtual(t *testing.T) {
	for name, want := range map[string]bool{"docker0": true, "br-1a2b": true, "veth12": true, "virbr0": true, "eth0": false, "enp3s0": false, "wlan0": false, "wlp2s0": false} {
		if virtual(name) != want {
			t.Errorf("virtual(%s) = %v", name, !want)
		}
	}
}
