package livekit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	livekitpb "github.com/livekit/protocol/livekit"
	lksdk "github.com/livekit/server-sdk-go/v2"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/testkit/lktest"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/pkg/testkit/netns"
	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
	"github.com/alicia-voice/alicia/services/gateway"
	"github.com/alicia-voice/alicia/services/persistence/persistencetest"
)

// WebRTC needs an address of its own (pion offers no loopback candidates).
func TestMain(m *testing.M) { netns.Main(m) }

const aliceKey = "alice-key-0123456789"

type grant struct {
	URL, Token, Room, Identity string
	ExpiresAt                  int64
}

// voiceStack runs NATS, Postgres, persistence, a real livekit-server and
// the gateway handing out its tokens with the default TTL.
func voiceStack(t *testing.T) (base string, lk *lktest.Server) {
	t.Helper()
	return voiceStackWith(t, nil)
}

// voiceStackWith is voiceStack with mod applied to the gateway's Config.
func voiceStackWith(t *testing.T, mod func(*gateway.Config)) (base string, lk *lktest.Server) {
	t.Helper()
	lk = lktest.Start(t)
	ns := natstest.Run(t)
	pgURL := pgtest.NewURL(t)
	persistencetest.Start(t, ns.ClientURL(), pgURL)
	cfg := gateway.DefaultConfig()
	cfg.HTTPAddr, cfg.NATSURL, cfg.PostgresURL = "127.0.0.1:0", ns.ClientURL(), pgURL
	cfg.APIKeys, cfg.RateLimit = "alice:"+aliceKey, 1000
	cfg.LiveKit = gateway.LiveKit{URL: lk.URL, APIKey: lk.APIKey, APISecret: lk.APISecret, TokenTTL: gateway.DefaultConfig().LiveKit.TokenTTL}
	if mod != nil {
		mod(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addr, done := make(chan string, 1), make(chan error, 1)
	go func() { done <- gateway.Run(ctx, cfg, zerolog.Nop(), func(a string) { addr <- a }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("gateway: %v", err)
		}
	})
	select {
	case a := <-addr:
		return "http://" + a, lk
	case err := <-done:
		t.Fatalf("gateway: %v", err)
	}
	return "", nil
}

// call sends a request with the key (cookie empty) or the session cookie
// (and the page's Origin) and decodes the answer into out.
func call(t *testing.T, base, method, path, cookie string, body any, want int, out any) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	req.Header.Set("Content-Type", "application/json")
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
		req.Header.Set("Origin", base)
	} else if path != "/v1/session" {
		req.Header.Set("Authorization", "Bearer "+aliceKey)
	}
	return send(t, req, want, out)
}

// send sends req, fails the test unless the answer has status want, and
// decodes it into out (when not nil).
func send(t *testing.T, req *http.Request, want int, out any) *http.Response {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", req.Method, req.URL.Path, resp.StatusCode, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatal(err)
		}
	}
	return resp
}

// joined is a participant in a room; left is closed when it was
// disconnected.
type joined struct {
	room *lksdk.Room
	left chan struct{}
}

// join joins the room with the grant.
func join(t *testing.T, g grant) joined {
	t.Helper()
	left := make(chan struct{})
	room, err := lksdk.ConnectToRoomWithToken(g.URL, g.Token, &lksdk.RoomCallback{
		OnDisconnectedWithReason: func(lksdk.DisconnectionReason) { close(left) }})
	if err != nil {
		t.Fatalf("join %s: %v", g.Room, err)
	}
	t.Cleanup(room.Disconnect)
	return joined{room: room, left: left}
}

// waitLeft waits until j was disconnected, for want.
func waitLeft(t *testing.T, j joined, want livekitpb.DisconnectReason, since time.Time) {
	t.Helper()
	select {
	case <-j.left:
		t.Logf("left the room %s after %s", j.room.DisconnectReason(), time.Since(since).Round(time.Millisecond))
		if r := j.room.DisconnectReason(); r != want {
			t.Fatalf("left the room: %s, want %s", r, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("still in the room 10 s after the revocation (want %s)", want)
	}
}

// TestRevocationLiveKit: a token lasts the short default TTL; signing out
// removes from the room the participant that session's token let in (and
// the session gets no new token); deleting a conversation deletes its
// room, disconnecting whoever is in it.
func TestRevocationLiveKit(t *testing.T) {
	base, _ := voiceStack(t)
	var conv struct{ ID string }
	call(t, base, "POST", "/v1/conversations", "", map[string]any{"title": "voice"}, http.StatusCreated, &conv)
	tokenPath := "/v1/conversations/" + conv.ID + "/token"

	t.Run("sign-out removes the session's participant", func(t *testing.T) {
		resp := call(t, base, "POST", "/v1/session", "", map[string]string{"apiKey": aliceKey}, http.StatusCreated, nil)
		var cookie string
		for _, c := range resp.Cookies() {
			cookie = c.Name + "=" + c.Value
		}
		before := time.Now()
		var g grant
		call(t, base, "POST", tokenPath, cookie, nil, http.StatusOK, &g)
		if ttl := time.UnixMilli(g.ExpiresAt).Sub(before); ttl < 4*time.Minute || ttl > 5*time.Minute+time.Second {
			t.Fatalf("token valid for %s, want the default 5 minutes", ttl)
		}
		left := join(t, g)
		at := time.Now()
		call(t, base, "DELETE", "/v1/session", cookie, nil, http.StatusNoContent, nil)
		waitLeft(t, left, livekitpb.DisconnectReason_PARTICIPANT_REMOVED, at)
		call(t, base, "POST", tokenPath, cookie, nil, http.StatusUnauthorized, nil)
	})

	t.Run("deleting the conversation deletes its room", func(t *testing.T) {
		var g grant
		call(t, base, "POST", tokenPath, "", nil, http.StatusOK, &g)
		left := join(t, g)
		at := time.Now()
		call(t, base, "DELETE", "/v1/conversations/"+conv.ID, "", nil, http.StatusNoContent, nil)
		waitLeft(t, left, livekitpb.DisconnectReason_ROOM_DELETED, at)
		call(t, base, "POST", tokenPath, "", nil, http.StatusNotFound, nil)
	})
}
