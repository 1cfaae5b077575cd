package livekitserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/livekit/protocol/auth"

	"github.com/alicia-voice/alicia/pkg/livekitserver"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// binary returns the installed livekit-server, skipping (failing under
// CI=true) when there is none.
func binary(t *testing.T) string {
	t.Helper()
	bin, err := livekitserver.Find()
	if err != nil {
		testkit.Missing(t, "%v", err)
	}
	return bin
}

func executableFile(t *testing.T, path string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestFindOrder(t *testing.T) {
	cache, pathDir := t.TempDir(), t.TempDir()
	t.Setenv("ALICIA_CACHE_DIR", cache)
	t.Setenv("PATH", pathDir)
	t.Setenv(livekitserver.EnvBin, "")

	if _, err := livekitserver.Find(); !errors.Is(err, livekitserver.ErrNotInstalled) || !strings.Contains(err.Error(), "livekit-install") {
		t.Fatalf("Find with nothing installed = %v, want ErrNotInstalled with the install hint", err)
	}
	onPath := executableFile(t, filepath.Join(pathDir, "livekit-server"))
	cached := executableFile(t, filepath.Join(cache, "bin", "livekit-server"))
	explicit := executableFile(t, filepath.Join(t.TempDir(), "my-livekit"))

	tests := []struct {
		name, env, want string
		remove          string
	}{
		{name: "env wins", env: explicit, want: explicit},
		{name: "cache before PATH", want: cached},
		{name: "PATH last", remove: cached, want: onPath},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(livekitserver.EnvBin, tt.env)
			if tt.remove != "" {
				if err := os.Remove(tt.remove); err != nil {
					t.Fatal(err)
				}
			}
			got, err := livekitserver.Find()
			if err != nil || got != tt.want {
				t.Fatalf("Find = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	t.Run("env naming no executable is an error", func(t *testing.T) {
		t.Setenv(livekitserver.EnvBin, filepath.Join(t.TempDir(), "missing"))
		if _, err := livekitserver.Find(); err == nil || !strings.Contains(err.Error(), livekitserver.EnvBin) {
			t.Fatalf("Find = %v, want an error naming %s", err, livekitserver.EnvBin)
		}
	})
}

func TestBadOptions(t *testing.T) {
	bin := executableFile(t, filepath.Join(t.TempDir(), "livekit-server"))
	tests := []struct {
		name string
		opts livekitserver.Options
	}{
		{"not an IP", livekitserver.Options{IP: "localhost"}},
		{"every address without a node IP", livekitserver.Options{IP: "0.0.0.0"}},
		{"unspecified node IP", livekitserver.Options{NodeIP: "0.0.0.0"}},
		{"key without secret", livekitserver.Options{APIKey: "k"}},
		{"short secret", livekitserver.Options{APIKey: "k", APISecret: strings.Repeat("s", 31)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Bin = bin
			if _, err := livekitserver.Start(context.Background(), tt.opts); !errors.Is(err, livekitserver.ErrBadOptions) {
				t.Fatalf("Start = %v, want ErrBadOptions", err)
			}
		})
	}
}

// listRooms calls the server's Twirp RoomService with a token signed by
// key/secret and returns the HTTP status.
func listRooms(t *testing.T, s *livekitserver.Server, key, secret string) int {
	t.Helper()
	tok, err := auth.NewAccessToken(key, secret).SetVideoGrant(&auth.VideoGrant{RoomList: true}).SetValidFor(time.Minute).ToJWT()
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, s.HTTPURL()+"/twirp/livekit.RoomService/ListRooms", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestStartBindsOnlyItsOwn runs a real server on 127.0.0.1 and checks its
// config, its credentials and that Stop ends it.
func TestStartBindsOnlyItsOwn(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	start := time.Now()
	s, err := livekitserver.Start(context.Background(), livekitserver.Options{Bin: bin, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("livekit-server answered after %s", time.Since(start).Round(time.Millisecond))
	defer s.Stop()

	if s.URL != "ws://127.0.0.1:"+strconv.Itoa(s.Port) || len(s.APISecret) < livekitserver.MinSecretLen || s.APIKey == "" {
		t.Fatalf("server %+v", s)
	}
	if s.LogPath != filepath.Join(dir, "livekit-server.log") {
		t.Fatalf("log path %q", s.LogPath)
	}
	raw, err := os.ReadFile(s.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Port          int               `json:"port"`
		BindAddresses []string          `json:"bind_addresses"`
		Keys          map[string]string `json:"keys"`
		RTC           struct {
			TCPPort       int    `json:"tcp_port"`
			UDPPort       int    `json:"udp_port"`
			UseExternalIP bool   `json:"use_external_ip"`
			NodeIP        string `json:"node_ip"`
			IPs           struct {
				Includes []string `json:"includes"`
			} `json:"ips"`
		} `json:"rtc"`
		Logging struct {
			Level string `json:"level"`
		} `json:"logging"`
	}
	if err := json.Unmarshal(raw, &conf); err != nil {
		t.Fatalf("config %s: %v", raw, err)
	}
	if conf.Port != s.Port || len(conf.BindAddresses) != 1 || conf.BindAddresses[0] != "127.0.0.1" ||
		conf.RTC.TCPPort != s.RTCTCPPort || conf.RTC.UDPPort != s.RTCUDPPort || conf.RTC.UseExternalIP ||
		conf.RTC.NodeIP != "127.0.0.1" || len(conf.RTC.IPs.Includes) != 1 || conf.RTC.IPs.Includes[0] != "127.0.0.1/32" ||
		conf.Keys[s.APIKey] != s.APISecret || len(conf.Keys) != 1 || conf.Logging.Level != "warn" {
		t.Fatalf("config %s", raw)
	}
	if fi, err := os.Stat(s.ConfigPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("config file mode: %v %v (it holds the secret)", fi, err)
	}
	// The UDP mux owns its port on 127.0.0.1.
	if c, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.RTCUDPPort))); err == nil {
		c.Close()
		t.Fatalf("UDP port %d is free: the server does not listen on it", s.RTCUDPPort)
	}

	if got := listRooms(t, s, s.APIKey, s.APISecret); got != http.StatusOK {
		t.Fatalf("ListRooms with the server's key = %d", got)
	}
	if got := listRooms(t, s, s.APIKey, strings.Repeat("x", 40)); got != http.StatusUnauthorized {
		t.Fatalf("ListRooms with a wrong secret = %d, want 401", got)
	}

	// A second server on the same address gets other ports. Its log writer
	// fails: the server must live on when it prints (its output pipe stays
	// open).
	other, err := livekitserver.Start(context.Background(), livekitserver.Options{Bin: bin, APIKey: "other", APISecret: strings.Repeat("o", 32),
		Log: failingWriter{}, LogLevel: "info"})
	if err != nil {
		t.Fatal(err)
	}
	if other.LogPath != "" {
		t.Fatalf("log path %q with a log writer given", other.LogPath)
	}
	if other.Port == s.Port || other.RTCUDPPort == s.RTCUDPPort || other.RTCTCPPort == s.RTCTCPPort {
		t.Fatalf("second server shares ports: %+v %+v", s, other)
	}
	if got := listRooms(t, other, "other", strings.Repeat("o", 32)); got != http.StatusOK {
		t.Fatalf("ListRooms with the given key = %d", got)
	}
	if other.Output() == "" {
		t.Fatal("the server printed nothing at info level")
	}
	if got := listRooms(t, other, "other", strings.Repeat("o", 32)); got != http.StatusOK || other.Err() != nil {
		t.Fatalf("after printing to a failing writer: ListRooms = %d, process %v", got, other.Err())
	}
	otherDir := filepath.Dir(other.ConfigPath)
	if err := other.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(otherDir); !os.IsNotExist(err) {
		t.Fatalf("temporary dir %s left behind: %v", otherDir, err)
	}

	stopped := time.Now()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped in %s", time.Since(stopped).Round(time.Millisecond))
	select {
	case <-s.Done():
	default:
		t.Fatal("Done not closed after Stop")
	}
	if _, err := http.Get(s.HTTPURL() + "/"); err == nil {
		t.Fatal("the server still answers after Stop")
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

// TestStartFailsWithTheServersOutput: a config livekit-server rejects (a
// port already in use and given explicitly) is reported with its output.
func TestStartFailsWithTheServersOutput(t *testing.T) {
	bin := binary(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	_, err = livekitserver.Start(context.Background(), livekitserver.Options{Bin: bin, Port: busy.Addr().(*net.TCPAddr).Port})
	if !errors.Is(err, livekitserver.ErrExited) || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("Start on a busy port = %v, want ErrExited with the server's message", err)
	}
}
