package edge_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// usageSource is a database's answer, set by the test.
type usageSource struct {
	mu    sync.Mutex
	u     edge.Usage
	reads int
}

func (s *usageSource) Usage(_ context.Context, _ string, _, _ time.Time) (edge.Usage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	return s.u, nil
}

func startBudgeted(t *testing.T, js jetstream.JetStream, c *client, user string, acc *edge.Accounts) *edge.Session {
	t.Helper()
	l := edge.Limits{SessionRate: 1000, SessionBurst: 1000, FloodLimit: 1000}
	return run(t, edge.NewSession(js, owners{}, c, edge.Options{User: user, QueueSize: 1024, Limits: l, Accounts: acc, Log: zerolog.Nop()}))
}

func audioChunk(t *testing.T, cid string, stanza int32, n int) []byte {
	return encode(t, protocol.Envelope{StanzaID: stanza, ConversationID: cid, Type: protocol.TypeAudioChunk,
		Body: &protocol.AudioChunk{ConversationID: cid, Data: make([]byte, n), Format: "pcm_s16le_16000", Sequence: stanza, DurationMs: 20}})
}

func storedOf(t *testing.T, js jetstream.JetStream, cid string, typ protocol.MessageType) uint64 {
	t.Helper()
	ctx := context.Background()
	st, err := js.Stream(ctx, "CONVERSATIONS")
	if err != nil {
		t.Fatal(err)
	}
	subject := subjects.Client(cid, typ)
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[subject]
}

// overBudget returns the 505s the client got, checking each names its
// budget in the message and in meta, and is recoverable.
func overBudget(t *testing.T, envs []protocol.Envelope) []string {
	t.Helper()
	var names []string
	for _, e := range envs {
		m, ok := e.Body.(*protocol.ErrorMessage)
		if !ok || m.Code != protocol.CodeOverBudget {
			continue
		}
		name, _ := e.Meta[edge.MetaBudget].(string)
		if name == "" || !strings.Contains(m.Message, "over budget "+name) || !m.Recoverable {
			t.Fatalf("505 %+v meta %v: want the budget named in meta and message, recoverable", m, e.Meta)
		}
		names = append(names, name)
	}
	return names
}

// TestAudioBudgets: a user's audio beyond its bytes per second is refused
// with 505 audio_bytes_per_second saying when it frees, the connection
// stays open, refused audio costs the rate too (reads are paced until it
// is paid back), and other users are not touched; beyond its day (as the
// database says, plus what the process took since) with
// audio_bytes_per_day freeing at midnight UTC.
func TestAudioBudgets(t *testing.T) {
	ctx := context.Background()
	t.Run("per second", func(t *testing.T) {
		js, _ := setup(t)
		clock := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
		acc := edge.NewAccounts(edge.Budgets{AudioBytesPerSecond: 100 << 10, AudioBurstBytes: 256 << 10}, nil, zerolog.Nop())
		acc.SetClock(func() time.Time { return clock })
		c, o := &client{}, &client{}
		s, so := startBudgeted(t, js, c, "flood", acc), startBudgeted(t, js, o, "calm", acc)
		cid, ocid := configure(t, s, c), configure(t, so, o)
		for i := int32(2); i <= 11; i++ { // 10 × 64 KiB: 4 fit the burst
			s.HandleClient(ctx, audioChunk(t, cid, i, 64<<10))
		}
		so.HandleClient(ctx, audioChunk(t, ocid, 2, 64<<10))
		testkit.Eventually(t, 5*time.Second, func() bool { return len(overBudget(t, c.got())) == 6 }, "want 6 refusals")
		if n := storedOf(t, js, cid, protocol.TypeAudioChunk); n != 4 {
			t.Fatalf("%d chunks stored, want 4 (the burst)", n)
		}
		for _, e := range c.got() {
			if m, ok := e.Body.(*protocol.ErrorMessage); ok && (!strings.Contains(m.Message, "frees in") || e.Meta[edge.MetaRetryAfterMs] == int64(0)) {
				t.Fatalf("refusal %q meta %v: want when it frees", m.Message, e.Meta)
			}
		}
		testkit.Eventually(t, 5*time.Second, func() bool { return storedOf(t, js, ocid, protocol.TypeAudioChunk) == 1 }, "another user's chunk")
		if len(overBudget(t, o.got())) != 0 {
			t.Fatal("another user refused")
		}
		select {
		case <-s.Done():
			t.Fatalf("session ended: %v", s.Err())
		default:
		}
		// The refused chunks were read too: they cost the rate, down to a
		// debt of one burst (256 KiB), which Pace waits out before the
		// next read.
		if w := acc.AudioWait("flood"); w < 2500*time.Millisecond || w > 2600*time.Millisecond {
			t.Fatalf("audio debt %s, want 2.56s (256 KiB at 100 KiB/s)", w)
		}
		if acc.AudioWait("calm") != 0 {
			t.Fatal("another user in debt")
		}
		clock = clock.Add(3200 * time.Millisecond) // the debt and one chunk paid back
		s.HandleClient(ctx, audioChunk(t, cid, 12, 64<<10))
		s.HandleClient(ctx, audioChunk(t, cid, 13, 64<<10))
		testkit.Eventually(t, 5*time.Second, func() bool { return storedOf(t, js, cid, protocol.TypeAudioChunk) == 5 }, "a chunk after a second")
		testkit.Eventually(t, 5*time.Second, func() bool { return len(overBudget(t, c.got())) == 7 }, "and the next refused")
	})
	t.Run("per day", func(t *testing.T) {
		js, _ := setup(t)
		src := &usageSource{u: edge.Usage{AudioBytes: (1 << 20) - (100 << 10)}}
		acc := edge.NewAccounts(edge.Budgets{AudioBytesPerDay: 1 << 20, AudioBytesPerSecond: -1}, src, zerolog.Nop())
		c := &client{}
		s := startBudgeted(t, js, c, "talker", acc)
		acc.Wait() // the read the connection started
		cid := configure(t, s, c)
		for i := int32(2); i <= 4; i++ { // 40 KiB each: two fit the 100 KiB left
			s.HandleClient(ctx, audioChunk(t, cid, i, 40<<10))
		}
		testkit.Eventually(t, 5*time.Second, func() bool { return len(overBudget(t, c.got())) == 1 }, "want one refusal")
		if got := overBudget(t, c.got()); got[0] != edge.BudgetAudioDay {
			t.Fatalf("refused for %v", got)
		}
		if n := storedOf(t, js, cid, protocol.TypeAudioChunk); n != 2 {
			t.Fatalf("%d chunks stored, want 2", n)
		}
		for _, e := range c.got() {
			if m, ok := e.Body.(*protocol.ErrorMessage); ok && !strings.Contains(m.Message, "T00:00:00Z") {
				t.Fatalf("%q: want it to say it frees at midnight UTC", m.Message)
			}
		}
	})
}

// TestStoredBudget: once the database says a user stores its budget, what
// would store more is refused with 505 stored_bytes (no time: deleting
// frees it), while stopping an answer and voting still work.
func TestStoredBudget(t *testing.T) {
	ctx := context.Background()
	js, _ := setup(t)
	src := &usageSource{u: edge.Usage{StoredBytes: 10 << 20}}
	acc := edge.NewAccounts(edge.Budgets{StoredBytes: 10 << 20}, src, zerolog.Nop())
	c := &client{}
	s := startBudgeted(t, js, c, "hoarder", acc)
	acc.Wait()
	cid := configure(t, s, c)
	s.HandleClient(ctx, userMessage(t, cid, 2, nil))
	s.HandleClient(ctx, encode(t, protocol.Envelope{StanzaID: 3, ConversationID: cid, Type: protocol.TypeControlStop,
		Body: &protocol.ControlStop{ConversationID: cid}}))
	testkit.Eventually(t, 5*time.Second, func() bool { return len(overBudget(t, c.got())) == 1 }, "want one refusal")
	if n := storedOf(t, js, cid, protocol.TypeUserMessage); n != 0 {
		t.Fatalf("%d messages stored over the budget", n)
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return storedOf(t, js, cid, protocol.TypeControlStop) == 1 }, "a stop over the stored budget")
	for _, e := range c.got() {
		if m, ok := e.Body.(*protocol.ErrorMessage); ok && (!strings.Contains(m.Message, "delete conversations") || e.Meta[edge.MetaRetryAfterMs] != int64(0)) {
			t.Fatalf("%q meta %v: want deleting named, no time", m.Message, e.Meta)
		}
	}
}

// TestTextBudgets: a message, note or memory longer than its budget is
// refused with 505 naming the budget, and so is a non-audio envelope
// larger than envelope_bytes; a text at the limit is taken.
func TestTextBudgets(t *testing.T) {
	ctx := context.Background()
	js, _ := setup(t)
	acc := edge.NewAccounts(edge.Budgets{MessageChars: 10, NoteChars: 5, MemoryChars: 3, EnvelopeBytes: 2048}, nil, zerolog.Nop())
	c := &client{}
	s := startBudgeted(t, js, c, "writer", acc)
	cid := configure(t, s, c)
	msg := func(stanza int32, content string) []byte {
		return encode(t, protocol.Envelope{StanzaID: stanza, ConversationID: cid, Type: protocol.TypeUserMessage,
			Body: &protocol.UserMessage{ID: protocol.NewID("am"), ConversationID: cid, Content: content}})
	}
	s.HandleClient(ctx, msg(2, "ééééééééé!")) // 10 characters, 19 bytes
	s.HandleClient(ctx, msg(3, "ééééééééé!!"))
	s.HandleClient(ctx, encode(t, protocol.Envelope{StanzaID: 4, ConversationID: cid, Type: protocol.TypeUserNote,
		Body: &protocol.UserNote{ID: protocol.NewID("an"), MessageID: "am_x", Content: "123456", Action: "create", Category: "general"}}))
	s.HandleClient(ctx, encode(t, protocol.Envelope{StanzaID: 5, ConversationID: cid, Type: protocol.TypeMemoryAction,
		Body: &protocol.MemoryAction{ID: protocol.NewID("ama"), Action: protocol.MemoryActionActionCreate, Memory: &protocol.MemoryActionMemory{Content: "abcd"}}}))
	s.HandleClient(ctx, encode(t, protocol.Envelope{StanzaID: 6, ConversationID: cid, Type: protocol.TypeUserMessage,
		Meta: map[string]any{"client": strings.Repeat("x", 200)},
		Body: &protocol.UserMessage{ID: protocol.NewID("am"), ConversationID: cid, Content: "short", PreviousID: ptr(strings.Repeat("p", 2100))}}))
	testkit.Eventually(t, 5*time.Second, func() bool { return len(overBudget(t, c.got())) == 4 }, "want 4 refusals")
	got := strings.Join(overBudget(t, c.got()), " ")
	if got != "message_chars note_chars memory_chars envelope_bytes" {
		t.Fatalf("refused for %s", got)
	}
	if n := storedOf(t, js, cid, protocol.TypeUserMessage); n != 1 {
		t.Fatalf("%d messages stored, want the one at the limit", n)
	}
}

// TestConversationBudget: a user creates at most its budget of
// conversations in an hour (the database's count plus this process's);
// resuming an existing conversation is not creating one.
func TestConversationBudget(t *testing.T) {
	js, _ := setup(t)
	src := &usageSource{u: edge.Usage{Created: []edge.Creation{{ID: "ac_a", At: time.Now().Add(-50 * time.Minute)}, {ID: "ac_b", At: time.Now().Add(-time.Minute)}}}}
	acc := edge.NewAccounts(edge.Budgets{ConversationsPerHour: 3}, src, zerolog.Nop())
	first := &client{}
	s := startBudgeted(t, js, first, "maker", acc)
	acc.Wait()
	cid := configure(t, s, first) // the third
	second := &client{}
	s2 := startBudgeted(t, js, second, "maker", acc)
	s2.HandleClient(context.Background(), encode(t, protocol.Envelope{StanzaID: 1, Type: protocol.TypeConfiguration, Body: &protocol.Configuration{}}))
	testkit.Eventually(t, 5*time.Second, func() bool { return len(overBudget(t, second.got())) == 1 }, "the fourth refused")
	if s2.ConversationID() != "" {
		t.Fatal("a conversation was created over the budget")
	}
	for _, e := range second.got() {
		if m, ok := e.Body.(*protocol.ErrorMessage); ok && !strings.Contains(m.Message, "frees in 10m") {
			t.Fatalf("%q: want it to free when the oldest is an hour old", m.Message)
		}
	}
	third := &client{}
	l := edge.Limits{SessionRate: 1000, SessionBurst: 1000, FloodLimit: 1000}
	s3 := run(t, edge.NewSession(js, owners{cid: "maker"}, third, edge.Options{User: "maker", Limits: l, Accounts: acc, Log: zerolog.Nop()}))
	s3.HandleClient(context.Background(), encode(t, protocol.Envelope{StanzaID: 1, Type: protocol.TypeConfiguration,
		Body: &protocol.Configuration{ConversationID: &cid}}))
	testkit.Eventually(t, 5*time.Second, func() bool { return s3.ConversationID() == cid }, "resuming is not creating")
}

func ptr[T any](v T) *T { return &v }

// TestBudgetTableDefaults: the documented defaults, set as the variables,
// read back as DefaultBudgets; and a budget that refuses everything is
// reported naming its variable.
func TestBudgetTableDefaults(t *testing.T) {
	for _, r := range edge.BudgetTable() {
		t.Setenv(r.Variable, r.Default)
	}
	var b edge.Budgets
	if err := b.From(config.Environ()); err != nil {
		t.Fatal(err)
	}
	if b != edge.DefaultBudgets() {
		t.Fatalf("documented defaults read as %+v, want %+v", b, edge.DefaultBudgets())
	}
	t.Setenv("ALICIA_BUDGET_STORED_BYTES", "-2")
	if err := b.From(config.Environ()); err == nil {
		t.Fatal("a negative size taken")
	}
	b.StoredBytes, b.ConversationsPerHour = -1, -5
	if err := b.Validate(); err == nil || !strings.Contains(err.Error(), "ALICIA_BUDGET_CONVERSATIONS_PER_HOUR") || strings.Contains(err.Error(), "STORED") {
		t.Fatalf("Validate = %v: want only the conversations budget named", err)
	}
}

// BenchmarkBudgetCheck: the cost of the budget checks on one client
// envelope (a UserMessage): the text budgets and the account's stored
// budget, as the edge runs them before publishing.
func BenchmarkBudgetCheck(b *testing.B) {
	acc := edge.NewAccounts(edge.Budgets{}, &usageSource{u: edge.Usage{StoredBytes: 1 << 20}}, zerolog.Nop())
	acc.Warm("u")
	acc.Wait()
	msg := &protocol.UserMessage{ID: "am_1", ConversationID: "ac_1", Content: strings.Repeat("Hello there, how are you? ", 4)}
	b.ReportAllocs()
	for b.Loop() {
		if o := edge.CheckText(edge.BudgetMessage, "content", msg.Content, 32000); o != nil {
			b.Fatal(o)
		}
		if o := acc.Envelope("u", 160, 0, true); o != nil {
			b.Fatal(o)
		}
	}
}
