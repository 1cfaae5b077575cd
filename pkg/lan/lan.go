// Package lan finds the addresses at which other machines of the local
// network reach this one: what `alicia up` serves HTTPS on, puts in its
// certificate and gives LiveKit as its node IP.
package lan

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"net"
	"os"
	"slices"
	"strings"
)

// Address is one LAN address of an interface.
type Address struct {
	IP        net.IP
	Interface string
	// Default: the interface carries the default route (IPv4), so it is
	// the one other machines most likely share.
	Default bool
}

// virtualPrefixes name the interfaces of containers, VMs and VPN overlays,
// which no other machine of the LAN reaches.
var virtualPrefixes = []string{"docker", "br-", "veth", "virbr", "vnet", "cni", "flannel", "cali", "weave", "lxc", "lxd", "podman", "vboxnet", "vmnet", "tailscale", "zt", "wg", "tun", "tap", "kube"}

// Addresses returns the private IPv4 addresses (RFC 1918) of the interfaces
// that are up, not loopback and not virtual, the default route's interface
// first.
func Addresses() ([]Address, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	def := defaultRouteInterface("/proc/net/route")
	var out []Address
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 || virtual(i.Name) {
			continue
		}
		addrs, err := i.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			if ip := n.IP.To4(); ip != nil && ip.IsPrivate() {
				out = append(out, Address{IP: ip, Interface: i.Name, Default: i.Name == def})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Address) int {
		switch {
		case a.Default == b.Default:
			return 0
		case a.Default:
			return -1
		}
		return 1
	})
	return out, nil
}

func virtual(name string) bool {
	for _, p := range virtualPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// defaultRouteInterface is the interface of the IPv4 default route in a
// /proc/net/route table, or "".
func defaultRouteInterface(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	s := bufio.NewScanner(bytes.NewReader(data))
	s.Scan() // the header
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 8 {
			continue
		}
		// Iface Destination Gateway Flags RefCnt Use Metric Mask …
		if dst, err := hex.DecodeString(fields[1]); err == nil && len(dst) == 4 && dst[0]|dst[1]|dst[2]|dst[3] == 0 && fields[7] == "00000000" {
			return fields[0]
		}
	}
	return ""
}

// HostNames are the names a LAN knows this machine by: its host name and,
// for mDNS (Bonjour, Avahi), <host>.local. None when the host name is
// unknown or "localhost".
func HostNames() []string {
	h, err := os.Hostname()
	if err != nil || h == "" || h == "localhost" {
		return nil
	}
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	short, _, _ := strings.Cut(h, ".")
	names := []string{h}
	if short != h {
		names = append(names, short)
	}
	return append(names, short+".local")
}
