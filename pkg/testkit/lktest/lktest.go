// Package lktest runs a real livekit-server for a test, inside the test
// package's own network namespace (pkg/testkit/netns), on netns.IP():
//
//	func TestMain(m *testing.M) { netns.Main(m) }
//
//	func TestRoom(t *testing.T) {
//		lk := lktest.Start(t)
//		room, err := lksdk.ConnectToRoomWithToken(lk.URL, lk.Token(t, "conv_ac_1", "user-1"), cb)
//		…
//	}
//
// Without the namespace or the binary the test is skipped with the reason
// and the install hint, or fails under CI=true. The server is stopped when
// the test ends; when the test failed, the end of its output is logged.
package lktest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/livekit/protocol/auth"

	"github.com/alicia-voice/alicia/pkg/devtools"
	"github.com/alicia-voice/alicia/pkg/livekitserver"
	"github.com/alicia-voice/alicia/pkg/testkit/netns"
)

// Server is a livekit-server running for one test.
type Server struct {
	// URL is the signalling URL (ws://10.213.0.1:port).
	URL string
	// APIKey and APISecret sign tokens the server accepts.
	APIKey, APISecret string
	// Process is the running server.
	Process *livekitserver.Server
}

// Start runs livekit-server on netns.IP() with generated credentials and
// free ports, and stops it when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	netns.Require(t)
	bin := devtools.Need(t, devtools.LiveKit)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := livekitserver.Start(ctx, livekitserver.Options{Bin: bin, IP: netns.IP(), Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("lktest: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("lktest: stop: %v", err)
		}
		if t.Failed() {
			if out := strings.TrimSpace(p.Output()); out != "" {
				t.Logf("lktest: livekit-server output (last part):\n%s", out)
			}
		}
	})
	return &Server{URL: p.URL, APIKey: p.APIKey, APISecret: p.APISecret, Process: p}
}

// Token returns an access token for identity to join room, publish audio
// and data and subscribe, valid for an hour.
func (s *Server) Token(t testing.TB, room, identity string) string {
	t.Helper()
	tok, err := auth.NewAccessToken(s.APIKey, s.APISecret).
		SetIdentity(identity).
		SetValidFor(time.Hour).
		SetVideoGrant(&auth.VideoGrant{RoomJoin: true, Room: room,
			CanPublish: ptr(true), CanSubscribe: ptr(true), CanPublishData: ptr(true)}).
		ToJWT()
	if err != nil {
		t.Fatalf("lktest: token: %v", err)
	}
	return tok
}

func ptr[T any](v T) *T { return &v }
