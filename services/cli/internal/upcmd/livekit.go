package upcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"

	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/livekitserver"
)

// LiveKit is the LiveKit server of the stack: one already running
// (ALICIA_LIVEKIT_URL), or the livekit-server `alicia up` starts.
type LiveKit struct {
	// URL of a running server (ALICIA_LIVEKIT_URL). Empty: up starts one.
	URL string
	// APIKey and APISecret (ALICIA_LIVEKIT_API_KEY, ALICIA_LIVEKIT_API_SECRET,
	// + _FILE): required with URL; generated for a server up starts when
	// unset.
	APIKey, APISecret string
	// NodeIP is the address the started server binds and advertises in its
	// ICE candidates (ALICIA_LIVEKIT_NODE_IP). Empty: the machine's first
	// LAN address (pkg/lan; the default route's interface first), which
	// browsers of the LAN and this machine reach, else 127.0.0.1 (then only
	// this machine's clients reach it, and Chromium, which offers no
	// loopback candidate, does not).
	NodeIP string
	// Ports of the started server: signalling (ALICIA_LIVEKIT_PORT, default
	// 7880), ICE/TCP (ALICIA_LIVEKIT_RTC_TCP_PORT, default 7881) and the
	// single ICE UDP port (ALICIA_LIVEKIT_RTC_UDP_PORT, default 7882). 0
	// (the zero value) picks a free port.
	Port, RTCTCPPort, RTCUDPPort int
}

// liveKitFrom reads ALICIA_LIVEKIT_* of src.
func liveKitFrom(src config.Source, l *LiveKit) error {
	src.String("ALICIA_LIVEKIT_URL", &l.URL)
	src.String("ALICIA_LIVEKIT_NODE_IP", &l.NodeIP)
	return errors.Join(
		src.Secret("ALICIA_LIVEKIT_API_KEY", &l.APIKey),
		src.Secret("ALICIA_LIVEKIT_API_SECRET", &l.APISecret),
		src.Int("ALICIA_LIVEKIT_PORT", &l.Port),
		src.Int("ALICIA_LIVEKIT_RTC_TCP_PORT", &l.RTCTCPPort),
		src.Int("ALICIA_LIVEKIT_RTC_UDP_PORT", &l.RTCUDPPort),
	)
}

func defaultLiveKit() LiveKit {
	return LiveKit{Port: 7880, RTCTCPPort: 7881, RTCUDPPort: 7882}
}

func (l LiveKit) validate() error {
	var errs []error
	if l.URL != "" && (l.APIKey == "" || l.APISecret == "") {
		errs = append(errs, errors.New("ALICIA_LIVEKIT_URL names a running LiveKit server: also set ALICIA_LIVEKIT_API_KEY and ALICIA_LIVEKIT_API_SECRET"))
	}
	if l.URL == "" {
		if ip := net.ParseIP(l.NodeIP); l.NodeIP != "" && (ip == nil || ip.IsUnspecified()) {
			errs = append(errs, fmt.Errorf("ALICIA_LIVEKIT_NODE_IP %q: want this machine's address that clients reach (by default its LAN address)", l.NodeIP))
		}
		if (l.APIKey == "") != (l.APISecret == "") {
			errs = append(errs, errors.New("set both ALICIA_LIVEKIT_API_KEY and ALICIA_LIVEKIT_API_SECRET, or neither (up generates them)"))
		}
		if l.APISecret != "" && len(l.APISecret) < livekitserver.MinSecretLen {
			errs = append(errs, fmt.Errorf("ALICIA_LIVEKIT_API_SECRET: at least %d characters", livekitserver.MinSecretLen))
		}
		for _, p := range []struct {
			name string
			v    int
		}{{"ALICIA_LIVEKIT_PORT", l.Port}, {"ALICIA_LIVEKIT_RTC_TCP_PORT", l.RTCTCPPort}, {"ALICIA_LIVEKIT_RTC_UDP_PORT", l.RTCUDPPort}} {
			if p.v < 0 || p.v > 65535 {
				errs = append(errs, fmt.Errorf("%s %d: want 0..65535", p.name, p.v))
			}
		}
	}
	return errors.Join(errs...)
}

// liveKitStack is the LiveKit server the stack's services use.
type liveKitStack struct {
	URL, APIKey, APISecret string
	// server is the livekit-server up started (nil for an external one).
	server *livekitserver.Server
}

func (s liveKitStack) stop() error {
	if s.server == nil {
		return nil
	}
	return s.server.Stop()
}

// startLiveKit returns the external server of cfg, or starts
// livekit-server (installing it first when it is missing) with its config
// and log in dataDir/livekit.
func startLiveKit(ctx context.Context, l LiveKit, dataDir string, stderr io.Writer) (liveKitStack, error) {
	if l.URL != "" {
		return liveKitStack{URL: l.URL, APIKey: l.APIKey, APISecret: l.APISecret}, nil
	}
	bin, err := livekitserver.Find()
	if errors.Is(err, livekitserver.ErrNotInstalled) {
		fmt.Fprintf(stderr, "livekit-server was not found: installing %s (go install %s@%s into the cache; about 3 minutes the first time).\n"+
			"Set ALICIA_LIVEKIT_URL (+ _API_KEY, _API_SECRET) to use a LiveKit server you run instead.\n",
			livekitserver.Version, livekitserver.Module, livekitserver.Version)
		bin, err = livekitserver.Install(ctx, stderr)
	}
	if err != nil {
		return liveKitStack{}, fmt.Errorf("livekit-server: %w", err)
	}
	srv, err := livekitserver.Start(ctx, livekitserver.Options{
		Bin: bin, IP: l.NodeIP, Port: l.Port, RTCTCPPort: l.RTCTCPPort, RTCUDPPort: l.RTCUDPPort,
		APIKey: l.APIKey, APISecret: l.APISecret, Dir: filepath.Join(dataDir, "livekit"),
	})
	if err != nil {
		return liveKitStack{}, fmt.Errorf("livekit-server: %w", err)
	}
	return liveKitStack{URL: srv.URL, APIKey: srv.APIKey, APISecret: srv.APISecret, server: srv}, nil
}

// describe is the LiveKit line of up's banner.
func (s liveKitStack) describe() string {
	if s.server == nil {
		return s.URL + " (external, ALICIA_LIVEKIT_URL)"
	}
	note := "; signalling through the gateway's own origin"
	if ip := net.ParseIP(s.server.NodeIP); ip != nil && ip.IsLoopback() {
		note += "; no LAN address found: browsers of other machines need ALICIA_LIVEKIT_NODE_IP=<this machine's address they reach>"
	}
	return fmt.Sprintf("%s (livekit-server %s, RTC udp/%d tcp/%d, log %s%s)",
		s.URL, livekitserver.Version, s.server.RTCUDPPort, s.server.RTCTCPPort, s.server.LogPath, note)
}
