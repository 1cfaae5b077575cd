package edge_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

func startLimited(t *testing.T, js jetstream.JetStream, c *client, user string, l edge.Limits, users *edge.UserRates) *edge.Session {
	t.Helper()
	return run(t, edge.NewSession(js, owners{}, c, edge.Options{User: user, QueueSize: 256, Limits: l, Users: users, Log: zerolog.Nop()}))
}

func configure(t *testing.T, s *edge.Session, c *client) string {
	t.Helper()
	s.HandleClient(context.Background(), encode(t, protocol.Envelope{StanzaID: 1, Type: protocol.TypeConfiguration, Body: &protocol.Configuration{}}))
	testkit.Eventually(t, 5*time.Second, func() bool { return s.ConversationID() != "" && len(c.got()) >= 1 }, "not configured")
	return s.ConversationID()
}

func userMessage(t *testing.T, cid string, stanza int32, meta map[string]any) []byte {
	return encode(t, protocol.Envelope{StanzaID: stanza, ConversationID: cid, Type: protocol.TypeUserMessage, Meta: meta,
		Body: &protocol.UserMessage{ID: fmt.Sprintf("am_%s_%d", cid, stanza), ConversationID: cid, Content: "hi"}})
}

func stored(t *testing.T, js jetstream.JetStream, cid string) uint64 {
	t.Helper()
	ctx := context.Background()
	st, err := js.Stream(ctx, bus.StreamConversations)
	if err != nil {
		t.Fatal(err)
	}
	subject := subjects.Client(cid, protocol.TypeUserMessage)
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[subject]
}

func count(envs []protocol.Envelope, code int32) int {
	n := 0
	for _, c := range errorCodes(envs) {
		if c == code {
			n++
		}
	}
	return n
}

// TestEnvelopeRate: beyond its burst a session's envelopes are refused
// with a recoverable 504 naming the limit and nothing is published; the
// sessions of one user share the user's rate.
func TestEnvelopeRate(t *testing.T) {
	ctx := context.Background()
	t.Run("per session", func(t *testing.T) {
		js, _ := setup(t)
		c := &client{}
		s := startLimited(t, js, c, "u1", edge.Limits{SessionRate: 0.01, SessionBurst: 10, FloodLimit: 1000}, nil)
		cid := configure(t, s, c) // one of the 10
		for i := int32(2); i <= 40; i++ {
			s.HandleClient(ctx, userMessage(t, cid, i, nil))
		}
		testkit.Eventually(t, 5*time.Second, func() bool { return count(c.got(), protocol.CodeOverloaded) == 30 }, "want 30 refusals")
		if n := stored(t, js, cid); n != 9 {
			t.Fatalf("%d user messages stored, want 9", n)
		}
		for _, e := range c.got() {
			if m, ok := e.Body.(*protocol.ErrorMessage); ok && (!m.Recoverable || !strings.Contains(m.Message, "per connection")) {
				t.Fatalf("refusal %+v: want recoverable, naming the limit", m)
			}
		}
	})
	t.Run("per user over sessions", func(t *testing.T) {
		js, _ := setup(t)
		users := edge.NewUserRates()
		l := edge.Limits{SessionRate: 1000, SessionBurst: 1000, UserRate: 0.01, UserBurst: 12, FloodLimit: 1000}
		a, b := &client{}, &client{}
		sa, sb := startLimited(t, js, a, "u2", l, users), startLimited(t, js, b, "u2", l, users)
		other := &client{}
		so := startLimited(t, js, other, "u3", l, users)
		ca, cb, co := configure(t, sa, a), configure(t, sb, b), configure(t, so, other)
		for i := int32(2); i <= 11; i++ {
			sa.HandleClient(ctx, userMessage(t, ca, i, nil))
			sb.HandleClient(ctx, userMessage(t, cb, i, nil))
			so.HandleClient(ctx, userMessage(t, co, i, nil))
		}
		testkit.Eventually(t, 5*time.Second, func() bool {
			return count(a.got(), protocol.CodeOverloaded)+count(b.got(), protocol.CodeOverloaded) == 10
		}, "want 10 refusals over the user's two sessions")
		if n := stored(t, js, ca) + stored(t, js, cb); n != 10 {
			t.Fatalf("%d user messages of u2 stored, want 10 (12 minus 2 Configurations)", n)
		}
		if n := stored(t, js, co); n != 10 || count(other.got(), protocol.CodeOverloaded) != 0 {
			t.Fatalf("another user: %d stored, refused %v", n, errorCodes(other.got()))
		}
	})
	t.Run("a flooding client is disconnected", func(t *testing.T) {
		js, _ := setup(t)
		c := &client{}
		s := startLimited(t, js, c, "u4", edge.Limits{SessionRate: 0.01, SessionBurst: 2, FloodLimit: 20}, nil)
		cid := configure(t, s, c)
		for i := int32(2); i <= 100; i++ {
			s.HandleClient(ctx, userMessage(t, cid, i, nil))
		}
		select {
		case <-s.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("flooding client not disconnected")
		}
		if !errors.Is(s.Err(), edge.ErrFlooding) {
			t.Fatalf("ended with %v", s.Err())
		}
		if n := stored(t, js, cid); n != 1 {
			t.Fatalf("%d stored, want 1", n)
		}
	})
}

func TestUserRatesAreBounded(t *testing.T) {
	js, _ := setup(t)
	users := edge.NewUserRates()
	users.MaxUsers = 3
	for i := range 10 {
		c := &client{}
		configure(t, startLimited(t, js, c, fmt.Sprintf("user-%d", i), edge.Limits{}, users), c)
	}
	if n := users.Len(); n > 3 {
		t.Fatalf("%d users tracked, want at most 3", n)
	}
}

// TestClientMeta: only allowed meta keys, a few and small, are taken; an
// envelope with another is refused with 103 naming the key; alicia.* keys
// are replaced by the edge's.
func TestClientMeta(t *testing.T) {
	js, _ := setup(t)
	ctx := context.Background()
	many := map[string]any{}
	for _, k := range edge.DefaultMetaKeys {
		many[k] = "x"
	}
	many["alicia.user_id"] = "ignored"
	cases := []struct {
		name string
		meta map[string]any
		want string // "" = stored
	}{
		{"trace context and client info", map[string]any{"messaging.trace_id": "0af7651916cd43dd8448eb211c80319c", "timestamp": int64(1700000000000),
			"clientVersion": "1.2.0", edge.MetaUserID: "someone-else"}, ""},
		{"unknown key", map[string]any{"timestamp": 1, "row_bomb_1": "x"}, `"row_bomb_1"`},
		{"value too large", map[string]any{"clientVersion": strings.Repeat("v", 300)}, `"clientVersion"`},
		{"too many keys", map[string]any{"timestamp": 1, "clientVersion": "1", "source": "web"}, "at most 2"},
		{"all allowed keys", many, "at most 2"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &client{}
			l := edge.Limits{MetaMaxKeys: 2}
			if i == 0 {
				l = edge.Limits{} // the defaults
			}
			s := startLimited(t, js, c, "meta-user", l, nil)
			cid := configure(t, s, c)
			s.HandleClient(ctx, userMessage(t, cid, 2, tc.meta))
			if tc.want == "" {
				testkit.Eventually(t, 5*time.Second, func() bool { return stored(t, js, cid) == 1 }, "not stored")
				return
			}
			testkit.Eventually(t, 5*time.Second, func() bool { return len(errorCodes(c.got())) == 1 }, "not refused")
			for _, e := range c.got() {
				if m, ok := e.Body.(*protocol.ErrorMessage); ok && (m.Code != protocol.CodeInvalidBody || !strings.Contains(m.Message, tc.want)) {
					t.Fatalf("refusal %d %q, want 103 naming %s", m.Code, m.Message, tc.want)
				}
			}
			if n := stored(t, js, cid); n != 0 {
				t.Fatalf("%d stored", n)
			}
		})
	}
}
