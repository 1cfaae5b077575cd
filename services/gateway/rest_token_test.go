package gateway_test

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livekit/protocol/auth"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/services/gateway"
)

const (
	lkKey    = "APItestkey"
	lkSecret = "a-test-secret-of-at-least-32-characters"
)

type roomGrant struct {
	URL       string `json:"url"`
	Token     string `json:"token"`
	Room      string `json:"room"`
	Identity  string `json:"identity"`
	ExpiresAt int64  `json:"expiresAt"`
}

func withLiveKit(c *gateway.Config) {
	c.LiveKit = gateway.LiveKit{URL: "ws://10.0.0.5:7880", PublicURL: "wss://voice.example", APIKey: lkKey, APISecret: lkSecret, TokenTTL: 30 * time.Minute}
}

// dispatchQueue returns how many requests wait on the conversation's
// dispatch subject, and the last one.
func dispatchQueue(t *testing.T, s *stack, cid string) (int, protocol.AgentDispatch) {
	t.Helper()
	js := natstest.JetStream(t, s.nc)
	st, err := js.Stream(t.Context(), bus.StreamDispatch)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(t.Context(), jetstream.WithSubjectFilter(subjects.Dispatch("alice", cid)))
	if err != nil {
		t.Fatal(err)
	}
	n := int(info.State.Subjects[subjects.Dispatch("alice", cid)])
	if n == 0 {
		return 0, protocol.AgentDispatch{}
	}
	m, err := st.GetLastMsgForSubject(t.Context(), subjects.Dispatch("alice", cid))
	if err != nil {
		t.Fatal(err)
	}
	env, err := protocol.Decode(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := env.Body.(*protocol.AgentDispatch)
	if !ok || env.Type != protocol.TypeAgentDispatch || env.ConversationID != cid {
		t.Fatalf("dispatch envelope %+v", env)
	}
	return n, *d
}

func TestConversationToken(t *testing.T) {
	s := newStack(t, func(o *stackOptions) { o.gateway = withLiveKit })
	var c conversation
	s.call(t, aliceKey, "POST", "/v1/conversations", map[string]any{"title": "voice"}).want(http.StatusCreated, &c)
	path := "/v1/conversations/" + c.ID + "/token"

	before := time.Now()
	var g roomGrant
	s.call(t, aliceKey, "POST", path, nil).want(http.StatusOK, &g)
	if g.URL != "wss://voice.example" || g.Room != "conv_"+c.ID || g.Identity != "alice" {
		t.Fatalf("grant %+v", g)
	}
	wantExp := before.Add(30 * time.Minute)
	if d := time.UnixMilli(g.ExpiresAt).Sub(wantExp); d < -time.Second || d > 2*time.Second {
		t.Fatalf("expiresAt %s, want about %s", time.UnixMilli(g.ExpiresAt), wantExp)
	}

	t.Run("token is signed with the secret and scoped to the room", func(t *testing.T) {
		v, err := auth.ParseAPIToken(g.Token)
		if err != nil {
			t.Fatal(err)
		}
		if v.APIKey() != lkKey || v.Identity() != "alice" {
			t.Fatalf("token key %q identity %q", v.APIKey(), v.Identity())
		}
		if _, _, err := v.Verify(strings.Repeat("x", 40)); err == nil {
			t.Fatal("the token verifies with another secret")
		}
		_, claims, err := v.Verify(lkSecret)
		if err != nil {
			t.Fatalf("verify with the secret: %v", err)
		}
		vg := claims.Video
		if vg == nil || !vg.RoomJoin || vg.Room != "conv_"+c.ID || !vg.GetCanPublish() || !vg.GetCanSubscribe() || !vg.GetCanPublishData() ||
			vg.RoomAdmin || vg.RoomCreate || vg.RoomList || vg.RoomRecord || vg.Hidden {
			t.Fatalf("video grant %+v, want join/publish/subscribe/data in conv_%s only", vg, c.ID)
		}
		if !slices.Equal(vg.CanPublishSources, []string{"microphone"}) {
			t.Fatalf("publishable sources %q, want the microphone only", vg.CanPublishSources)
		}
		if claims.Identity != "alice" {
			t.Fatalf("identity %q", claims.Identity)
		}
	})

	t.Run("asks for an agent once while one is pending", func(t *testing.T) {
		s.call(t, aliceKey, "POST", path, nil).want(http.StatusOK, nil) // a second call: already dispatched, still 200
		n, d := dispatchQueue(t, s, c.ID)
		if n != 1 {
			t.Fatalf("%d dispatch requests for %s, want 1", n, c.ID)
		}
		if d.ConversationID != c.ID || d.Room != "conv_"+c.ID || d.UserID == nil || *d.UserID != "alice" ||
			d.RequestedAt < before.UnixMilli() || d.RequestedAt > time.Now().UnixMilli() {
			t.Fatalf("dispatch %+v", d)
		}
	})

	t.Run("asks again once an agent took and finished the request", func(t *testing.T) {
		js := natstest.JetStream(t, s.nc)
		cons, err := js.CreateOrUpdateConsumer(t.Context(), bus.StreamDispatch, jetstream.ConsumerConfig{
			Durable: "test-agent", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: subjects.Dispatch("alice", c.ID)})
		if err != nil {
			t.Fatal(err)
		}
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := m.DoubleAck(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n, _ := dispatchQueue(t, s, c.ID); n != 0 {
			t.Fatalf("%d requests left after the agent acknowledged", n)
		}
		s.call(t, aliceKey, "POST", path, nil).want(http.StatusOK, nil)
		if n, _ := dispatchQueue(t, s, c.ID); n != 1 {
			t.Fatalf("%d dispatch requests after the room emptied, want 1", n)
		}
	})

	t.Run("a GET changes nothing", func(t *testing.T) {
		// A GET must not change state: requesting an agent is a POST. The
		// GET is gone (405) and asks for no agent.
		var fresh conversation
		s.call(t, aliceKey, "POST", "/v1/conversations", map[string]any{"title": "no voice"}).want(http.StatusCreated, &fresh)
		s.call(t, aliceKey, "GET", "/v1/conversations/"+fresh.ID+"/token", nil).wantError(http.StatusMethodNotAllowed)
		if n, _ := dispatchQueue(t, s, fresh.ID); n != 0 {
			t.Fatalf("a GET of the token asked for an agent (%d requests)", n)
		}
	})

	t.Run("owner only", func(t *testing.T) {
		for _, tt := range []struct {
			name, key, path string
			status          int
		}{
			{"another user's conversation", bobKey, path, http.StatusForbidden},
			{"unknown conversation", aliceKey, "/v1/conversations/ac_nope/token", http.StatusNotFound},
			{"no key", "", path, http.StatusUnauthorized},
		} {
			t.Run(tt.name, func(t *testing.T) {
				s.call(t, tt.key, "POST", tt.path, nil).wantError(tt.status)
			})
		}
		if n, _ := dispatchQueue(t, s, "ac_nope"); n != 0 {
			t.Fatal("a refused request asked for an agent")
		}
	})
}

func TestConversationTokenWithoutLiveKit(t *testing.T) {
	s := newStack(t)
	var c conversation
	s.call(t, aliceKey, "POST", "/v1/conversations", nil).want(http.StatusCreated, &c)
	msg := s.call(t, aliceKey, "POST", "/v1/conversations/"+c.ID+"/token", nil).wantError(http.StatusServiceUnavailable)
	if !strings.Contains(msg, "ALICIA_LIVEKIT_URL") {
		t.Fatalf("503 message %q does not say what to configure", msg)
	}
	if n, _ := dispatchQueue(t, s, c.ID); n != 0 {
		t.Fatal("asked for an agent without LiveKit")
	}
}

func TestLiveKitConfig(t *testing.T) {
	secretFile := filepath.Join(t.TempDir(), "lk-secret")
	if err := os.WriteFile(secretFile, []byte(lkSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ALICIA_POSTGRES_URL", "postgres://x@127.0.0.1/db")
	t.Setenv("ALICIA_API_KEYS", "me:0123456789abcdef")
	t.Setenv("ALICIA_LIVEKIT_URL", "ws://127.0.0.1:7880")
	t.Setenv("ALICIA_LIVEKIT_API_KEY", lkKey)
	t.Setenv("ALICIA_LIVEKIT_API_SECRET_FILE", secretFile)
	c, err := gateway.ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if c.LiveKit != (gateway.LiveKit{URL: "ws://127.0.0.1:7880", APIKey: lkKey, APISecret: lkSecret, TokenTTL: 5 * time.Minute}) ||
		c.LiveKit.ClientURL() != "ws://127.0.0.1:7880" {
		t.Fatalf("LiveKit config %+v", c.LiveKit)
	}
	t.Setenv("ALICIA_LIVEKIT_PUBLIC_URL", "wss://voice.example")
	t.Setenv("ALICIA_LIVEKIT_TOKEN_TTL", "10m")
	if c, err = gateway.ConfigFromEnv(); err != nil || c.LiveKit.ClientURL() != "wss://voice.example" || c.LiveKit.TokenTTL != 10*time.Minute {
		t.Fatalf("LiveKit config %+v, %v", c.LiveKit, err)
	}

	base := gateway.DefaultConfig()
	base.PostgresURL, base.APIKeys = "postgres://x@127.0.0.1/db", "me:0123456789abcdef"
	withLiveKit(&base)
	if err := base.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		edit func(*gateway.LiveKit)
		want string
	}{
		{"URL without key and secret", func(l *gateway.LiveKit) { l.APIKey, l.APISecret = "", "" }, "ALICIA_LIVEKIT_API_KEY"},
		{"secret without URL", func(l *gateway.LiveKit) { l.URL = "" }, "ALICIA_LIVEKIT_URL"},
		{"URL not ws or http", func(l *gateway.LiveKit) { l.URL = "tcp://lk:7880" }, "ALICIA_LIVEKIT_URL"},
		{"public URL without host", func(l *gateway.LiveKit) { l.PublicURL = "wss://" }, "ALICIA_LIVEKIT_PUBLIC_URL"},
		{"TTL too short", func(l *gateway.LiveKit) { l.TokenTTL = time.Second }, "ALICIA_LIVEKIT_TOKEN_TTL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			tt.edit(&cfg.LiveKit)
			if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want an error naming %s", err, tt.want)
			}
		})
	}
	off := gateway.DefaultConfig()
	off.PostgresURL, off.APIKeys = "postgres://x@127.0.0.1/db", "me:0123456789abcdef"
	if err := off.Validate(); err != nil || off.LiveKit.Enabled() {
		t.Fatalf("without LiveKit: Validate = %v, Enabled = %v", err, off.LiveKit.Enabled())
	}
}
