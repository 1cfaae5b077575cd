package livekitserver

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
)

// MinSecretLen is the shortest API secret livekit-server accepts without
// complaint (it logs an error below it).
const MinSecretLen = 32

// fileConfig is the subset of livekit-server's YAML config Start writes.
// It is written as JSON, which YAML parsers read as YAML; livekit-server
// parses its config strictly, so every key here must be one it knows.
type fileConfig struct {
	Port          int               `json:"port"`
	BindAddresses []string          `json:"bind_addresses"`
	RTC           rtcConfig         `json:"rtc"`
	Keys          map[string]string `json:"keys"`
	Logging       loggingConfig     `json:"logging"`
}

type rtcConfig struct {
	TCPPort int `json:"tcp_port"`
	// UDPPort is the single port of the ICE UDP mux.
	UDPPort       int    `json:"udp_port"`
	UseExternalIP bool   `json:"use_external_ip"`
	NodeIP        string `json:"node_ip"`
	// IPs restricts the addresses the UDP mux listens on and offers as
	// candidates to the bind address.
	IPs ipsConfig `json:"ips"`
	// EnableLoopbackCandidate is needed when the bind address is a
	// loopback one (LiveKit skips loopback addresses otherwise).
	EnableLoopbackCandidate bool `json:"enable_loopback_candidate"`
}

type ipsConfig struct {
	Includes []string `json:"includes,omitempty"`
}

type loggingConfig struct {
	Level     string `json:"level"`
	PionLevel string `json:"pion_level"`
}

// render returns the config file for the resolved options.
func render(o Options) ([]byte, error) {
	ip := net.ParseIP(o.IP)
	var includes []string
	switch {
	case ip.IsUnspecified(): // every address
	case ip.To4() != nil:
		includes = []string{ip.String() + "/32"}
	default:
		includes = []string{ip.String() + "/128"}
	}
	cfg := fileConfig{
		Port:          o.Port,
		BindAddresses: []string{o.IP},
		RTC: rtcConfig{
			TCPPort:                 o.RTCTCPPort,
			UDPPort:                 o.RTCUDPPort,
			UseExternalIP:           false,
			NodeIP:                  o.NodeIP,
			IPs:                     ipsConfig{Includes: includes},
			EnableLoopbackCandidate: ip.IsLoopback(),
		},
		Keys:    map[string]string{o.APIKey: o.APISecret},
		Logging: loggingConfig{Level: o.LogLevel, PionLevel: "error"},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("livekitserver: config: %w", err)
	}
	return append(b, '\n'), nil
}

// NewKey returns a generated API key ("API" and 12 hex digits).
func NewKey() string { return "API" + randomHex(6) }

// NewSecret returns a generated API secret (64 hex digits).
func NewSecret() string { return randomHex(32) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}
