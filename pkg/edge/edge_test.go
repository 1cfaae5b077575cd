package edge_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
)

// client records the frames a session sends; block makes it a slow client.
type client struct {
	mu     sync.Mutex
	frames []protocol.Envelope
	block  chan struct{}
}

func (c *client) Send(ctx context.Context, frame []byte) error {
	if c.block != nil {
		select {
		case <-c.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	env, err := protocol.Decode(frame)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.frames = append(c.frames, env)
	c.mu.Unlock()
	return nil
}

func (c *client) got() []protocol.Envelope {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]protocol.Envelope(nil), c.frames...)
}

type owners map[string]string // conversation → user

func (o owners) Authorize(_ context.Context, user, cid string) error {
	owner, ok := o[cid]
	switch {
	case !ok:
		return edge.ErrNotFound
	case owner != user:
		return edge.ErrForbidden
	}
	return nil
}

func setup(t *testing.T) (jetstream.JetStream, *bus.Publisher) {
	t.Helper()
	s := natstest.Run(t)
	js := natstest.JetStream(t, natstest.Connect(t, s))
	if err := bus.EnsureStreams(context.Background(), js, bus.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	return js, bus.NewPublisher(js)
}

func start(t *testing.T, js jetstream.JetStream, auth edge.Authorizer, c *client, user string, queue int) *edge.Session {
	t.Helper()
	return run(t, edge.NewSession(js, auth, c, edge.Options{User: user, QueueSize: queue, Log: zerolog.Nop()}))
}

// run runs s until the test ends.
func run(t *testing.T, s *edge.Session) *edge.Session {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

func encode(t *testing.T, env protocol.Envelope) []byte {
	t.Helper()
	b, err := protocol.Encode(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func errorCodes(envs []protocol.Envelope) []int32 {
	var codes []int32
	for _, e := range envs {
		if m, ok := e.Body.(*protocol.ErrorMessage); ok {
			codes = append(codes, m.Code)
		}
	}
	return codes
}

func TestNewConversationAndLiveForwarding(t *testing.T) {
	js, pub := setup(t)
	c := &client{}
	s := start(t, js, owners{}, c, "user-1", 64)
	ctx := context.Background()

	s.HandleClient(ctx, encode(t, protocol.Envelope{StanzaID: 1, Type: protocol.TypeConfiguration, Body: &protocol.Configuration{}}))
	testkit.Eventually(t, 5*time.Second, func() bool { return len(c.got()) == 1 }, "no Configuration reply")
	reply := c.got()[0]
	cfg, ok := reply.Body.(*protocol.Configuration)
	if !ok || cfg.ConversationID == nil || *cfg.ConversationID != s.ConversationID() || reply.StanzaID >= 0 {
		t.Fatalf("reply = %+v", reply)
	}
	cid := s.ConversationID()

	// A client envelope reaches the stream with the user from the edge, not the client.
	s.HandleClient(ctx, encode(t, protocol.Envelope{StanzaID: 2, ConversationID: cid, Type: protocol.TypeUserMessage,
		Meta: map[string]any{edge.MetaUserID: "someone-else"}, Body: &protocol.UserMessage{ID: "am_1", ConversationID: cid, Content: "hi"}}))
	st, _ := js.Stream(ctx, bus.StreamConversations)
	testkit.EventuallyNoError(t, 5*time.Second, func() error {
		_, err := st.GetLastMsgForSubject(ctx, subjects.Client(cid, protocol.TypeUserMessage))
		return err
	}, "user message not published")
	m, _ := st.GetLastMsgForSubject(ctx, subjects.Client(cid, protocol.TypeUserMessage))
	stored, err := protocol.Decode(m.Data)
	if err != nil || stored.Meta[edge.MetaUserID] != "user-1" {
		t.Fatalf("stored = %+v, %v", stored, err)
	}

	ack, err := pub.PublishServer(ctx, protocol.New(cid, &protocol.StartAnswer{ID: "am_2", PreviousID: "am_1", ConversationID: cid}), "")
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return len(c.got()) == 2 }, "server envelope not forwarded")
	if got := c.got()[1]; got.Type != protocol.TypeStartAnswer || got.StanzaID != -int32(ack.Sequence) {
		t.Fatalf("forwarded %+v, want StartAnswer with stanza %d", got, -int32(ack.Sequence))
	}
}

func TestResumeAfterLastSequenceSeen(t *testing.T) {
	js, pub := setup(t)
	ctx := context.Background()
	const cid = "ac_resume"
	var stanzas []int32
	for i := int32(1); i <= 6; i++ {
		ack, err := pub.PublishServer(ctx, protocol.New(cid, &protocol.AssistantSentence{PreviousID: "am_a", ConversationID: cid, Sequence: i, Text: "s"}), "")
		if err != nil {
			t.Fatal(err)
		}
		stanzas = append(stanzas, -int32(ack.Sequence))
		// Another conversation's envelopes in between must not leak in.
		if _, err := pub.PublishServer(ctx, protocol.New("ac_other", &protocol.AssistantSentence{PreviousID: "am_b", ConversationID: "ac_other", Sequence: i, Text: "x"}), ""); err != nil {
			t.Fatal(err)
		}
	}
	c := &client{}
	s := start(t, js, owners{cid: "u"}, c, "u", 64)
	last := stanzas[2] // the client saw three sentences
	s.HandleClient(ctx, encode(t, protocol.Envelope{StanzaID: 7, Type: protocol.TypeConfiguration,
		Body: &protocol.Configuration{ConversationID: protocol.Ptr(cid), LastSequenceSeen: &last}}))
	testkit.Eventually(t, 5*time.Second, func() bool { return len(c.got()) == 4 }, "want 3 missed sentences + the Configuration reply")
	got := c.got()
	for i, want := range stanzas[3:] {
		b, ok := got[i].Body.(*protocol.AssistantSentence)
		if !ok || got[i].StanzaID != want || b.Sequence != int32(4+i) || got[i].ConversationID != cid {
			t.Fatalf("frame %d = %+v, want sentence %d with stanza %d", i, got[i], 4+i, want)
		}
	}
	if got[3].Type != protocol.TypeConfiguration {
		t.Fatalf("last frame = %+v, want the Configuration reply", got[3])
	}
}

func TestBadInputKeepsTheSessionOpen(t *testing.T) {
	js, _ := setup(t)
	ctx := context.Background()
	c := &client{}
	s := start(t, js, owners{"ac_theirs": "other", "ac_mine": "me"}, c, "me", 64)
	s.HandleClient(ctx, encode(t, protocol.New("", &protocol.UserMessage{ID: "am_x", ConversationID: "ac_mine", Content: "too early"})))
	s.HandleClient(ctx, []byte{0x93, 0x01})
	s.HandleClient(ctx, encode(t, protocol.Envelope{StanzaID: 1, Type: protocol.TypeConfiguration, Body: &protocol.Configuration{ConversationID: protocol.Ptr("ac_theirs")}}))
	s.HandleClient(ctx, encode(t, protocol.Envelope{StanzaID: 1, Type: protocol.TypeConfiguration, Body: &protocol.Configuration{ConversationID: protocol.Ptr("ac_gone")}}))
	s.HandleClient(ctx, encode(t, protocol.Envelope{StanzaID: 1, Type: protocol.TypeConfiguration, Body: &protocol.Configuration{ConversationID: protocol.Ptr("ac_mine")}}))
	s.HandleClient(ctx, encode(t, protocol.Envelope{StanzaID: 2, ConversationID: "ac_theirs", Type: protocol.TypeUserMessage,
		Body: &protocol.UserMessage{ID: "am_y", ConversationID: "ac_theirs", Content: "wrong conversation"}}))
	want := []int32{protocol.CodeInvalidState, protocol.CodeMalformed, protocol.CodeForbidden, protocol.CodeNotFound, protocol.CodeForbidden}
	testkit.Eventually(t, 5*time.Second, func() bool { return len(errorCodes(c.got())) == len(want) }, "error messages")
	for i, code := range errorCodes(c.got()) {
		if code != want[i] {
			t.Fatalf("error codes = %v, want %v", errorCodes(c.got()), want)
		}
	}
	select {
	case <-s.Done():
		t.Fatalf("session ended: %v", s.Err())
	default:
	}
}

func TestSlowClientIsDisconnected(t *testing.T) {
	js, pub := setup(t)
	ctx := context.Background()
	slow := &client{block: make(chan struct{})}
	fast := &client{}
	sSlow := start(t, js, owners{"ac_busy": "u"}, slow, "u", 4)
	sFast := start(t, js, owners{"ac_busy": "u"}, fast, "u", 4096)
	for _, s := range []*edge.Session{sSlow, sFast} {
		s.HandleClient(ctx, encode(t, protocol.Envelope{StanzaID: 1, Type: protocol.TypeConfiguration, Body: &protocol.Configuration{ConversationID: protocol.Ptr("ac_busy")}}))
	}
	for i := int32(1); i <= 50; i++ {
		if _, err := pub.PublishServer(ctx, protocol.New("ac_busy", &protocol.AssistantSentence{PreviousID: "am_a", ConversationID: "ac_busy", Sequence: i, Text: "s"}), ""); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-sSlow.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("slow client not disconnected")
	}
	if !errors.Is(sSlow.Err(), edge.ErrSlowClient) {
		t.Fatalf("slow session ended with %v", sSlow.Err())
	}
	close(slow.block) // the client reads again: it gets the goodbye
	testkit.Eventually(t, 5*time.Second, func() bool {
		codes := errorCodes(slow.got())
		return len(codes) > 0 && codes[len(codes)-1] == protocol.CodeOverloaded
	}, "slow client not told why")
	// The fast client got every sentence.
	testkit.Eventually(t, 5*time.Second, func() bool {
		n := 0
		for _, e := range fast.got() {
			if e.Type == protocol.TypeAssistantSentence {
				n++
			}
		}
		return n == 50
	}, "fast client slowed down")
}

func TestBoundConversation(t *testing.T) {
	js, _ := setup(t)
	ctx := context.Background()
	const cid = "ac_room1"

	t.Run("configuration without id binds the room's conversation", func(t *testing.T) {
		c := &client{}
		var configured []string
		s := edge.NewSession(js, owners{}, c, edge.Options{User: "user-1", Conversation: cid, Log: zerolog.Nop(),
			OnConfigured: func(got string, cfg *protocol.Configuration) { configured = append(configured, got) }})
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = s.Run(runCtx) }()
		t.Cleanup(func() { cancel(); <-done })

		s.HandleClient(ctx, encode(t, protocol.Envelope{StanzaID: 1, Type: protocol.TypeConfiguration, Body: &protocol.Configuration{}}))
		testkit.Eventually(t, 5*time.Second, func() bool { return len(c.got()) == 1 }, "no Configuration reply")
		if s.ConversationID() != cid || len(configured) != 1 || configured[0] != cid {
			t.Fatalf("bound to %q, configured %v", s.ConversationID(), configured)
		}
	})
	t.Run("another conversation is refused", func(t *testing.T) {
		c := &client{}
		// owners lets user-1 use ac_other: an unbound session would accept it, a bound one must not.
		b := edge.NewSession(js, owners{"ac_other": "user-1"}, c, edge.Options{User: "user-1", Conversation: cid, Log: zerolog.Nop()})
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = b.Run(runCtx) }()
		t.Cleanup(func() { cancel(); <-done })
		other := "ac_other"
		b.HandleClient(ctx, encode(t, protocol.Envelope{StanzaID: 1, Type: protocol.TypeConfiguration, Body: &protocol.Configuration{ConversationID: &other}}))
		testkit.Eventually(t, 5*time.Second, func() bool { return len(c.got()) == 1 }, "no answer")
		if codes := errorCodes(c.got()); len(codes) != 1 || codes[0] != protocol.CodeForbidden || b.ConversationID() != "" {
			t.Fatalf("codes %v, bound %q", codes, b.ConversationID())
		}
	})
}

func TestResentConfigurationIsIgnored(t *testing.T) {
	js, _ := setup(t)
	c := &client{}
	s := start(t, js, owners{}, c, "user-1", 16)
	ctx := context.Background()
	cfg := encode(t, protocol.Envelope{StanzaID: 1, Type: protocol.TypeConfiguration, Body: &protocol.Configuration{}})
	s.HandleClient(ctx, cfg)
	s.HandleClient(ctx, cfg) // resent: the client had not seen the answer yet
	s.HandleClient(ctx, encode(t, protocol.Envelope{StanzaID: 2, Type: protocol.TypeConfiguration, Body: &protocol.Configuration{}}))
	testkit.Eventually(t, 5*time.Second, func() bool { return len(c.got()) == 2 }, "want the answer and one error")
	if codes := errorCodes(c.got()); len(codes) != 1 || codes[0] != protocol.CodeInvalidState {
		t.Fatalf("errors %v; want one 104 for the new Configuration", codes)
	}
	// The resent Configuration was answered by nothing: the stream holds one answer.
	st, err := js.Stream(ctx, bus.StreamConversations)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subjects.Server(s.ConversationID(), protocol.TypeConfiguration)))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects[subjects.Server(s.ConversationID(), protocol.TypeConfiguration)]; n != 1 {
		t.Fatalf("%d Configuration answers in the stream, want 1", n)
	}
}

// TestResumeFromAnotherStream: a client whose last sequence lies beyond the
// stream's end read it from another stream of this name (a new JetStream
// store starts at 1 again); it gets the conversation from the start of this
// stream instead of nothing.
func TestResumeFromAnotherStream(t *testing.T) {
	js, pub := setup(t)
	ctx := context.Background()
	const cid = "ac_new_stream"
	for i := int32(1); i <= 2; i++ {
		if _, err := pub.PublishServer(ctx, protocol.New(cid, &protocol.AssistantSentence{PreviousID: "am_a", ConversationID: cid, Sequence: i, Text: "s"}), ""); err != nil {
			t.Fatal(err)
		}
	}
	c := &client{}
	s := start(t, js, owners{cid: "u"}, c, "u", 64)
	last := int32(-500) // seen on the old stream
	s.HandleClient(ctx, encode(t, protocol.Envelope{StanzaID: 9, Type: protocol.TypeConfiguration,
		Body: &protocol.Configuration{ConversationID: protocol.Ptr(cid), LastSequenceSeen: &last}}))
	testkit.Eventually(t, 5*time.Second, func() bool { return len(c.got()) == 3 }, "want the stream's 2 sentences + the Configuration reply")
	for i, f := range c.got()[:2] {
		if b, ok := f.Body.(*protocol.AssistantSentence); !ok || b.Sequence != int32(i+1) {
			t.Fatalf("frame %d = %+v, want sentence %d", i, f, i+1)
		}
	}
}

// TestCreatingConfigurationCarriesItsOwner: a Configuration that would start
// a conversation without reaching the stream (stanzaId ≤ 0: the owner is
// stored from its meta) is refused and creates nothing.
func TestCreatingConfigurationCarriesItsOwner(t *testing.T) {
	js, _ := setup(t)
	ctx := context.Background()
	c := &client{}
	s := start(t, js, owners{}, c, "user-1", 64)
	s.HandleClient(ctx, encode(t, protocol.Envelope{StanzaID: 0, Type: protocol.TypeConfiguration, Body: &protocol.Configuration{}}))
	testkit.Eventually(t, 5*time.Second, func() bool { return len(c.got()) == 1 }, "no answer")
	if codes := errorCodes(c.got()); len(codes) != 1 || codes[0] != protocol.CodeMalformed || s.ConversationID() != "" {
		t.Fatalf("frames %+v, conversation %q; want one 101 and no conversation", c.got(), s.ConversationID())
	}
	st, err := js.Stream(ctx, bus.StreamConversations)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx); err != nil || info.State.Msgs != 0 {
		t.Fatalf("stream holds %d envelopes (%v), want none", info.State.Msgs, err)
	}
}
