package bus_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
)

func setup(t *testing.T) (*nats.Conn, jetstream.JetStream, *bus.Publisher) {
	t.Helper()
	s := natstest.Run(t)
	nc := natstest.Connect(t, s)
	js := natstest.JetStream(t, nc)
	if err := bus.EnsureStreams(context.Background(), js, bus.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	return nc, js, bus.NewPublisher(js)
}

func userMessage(cid string, stanza int32, content string) protocol.Envelope {
	return protocol.Envelope{StanzaID: stanza, ConversationID: cid, Type: protocol.TypeUserMessage,
		Body: &protocol.UserMessage{ID: fmt.Sprintf("am_%d", stanza), ConversationID: cid, Content: content}}
}

func TestStreamsAreDurableAndDirect(t *testing.T) {
	_, js, _ := setup(t)
	for _, name := range []string{bus.StreamConversations, bus.StreamSystem, bus.StreamDeadLetter} {
		st, err := js.Stream(context.Background(), name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cfg := st.CachedInfo().Config
		if cfg.Storage != jetstream.FileStorage || !cfg.AllowDirect || cfg.Duplicates != 2*time.Minute {
			t.Errorf("%s config = storage %v direct %v dup %v", name, cfg.Storage, cfg.AllowDirect, cfg.Duplicates)
		}
	}
}

func TestPublishClientDeduplicatesResends(t *testing.T) {
	_, js, pub := setup(t)
	ctx := context.Background()
	a1, err := pub.PublishClient(ctx, userMessage("ac_1", 1, "hi"))
	if err != nil {
		t.Fatal(err)
	}
	a2, err := pub.PublishClient(ctx, userMessage("ac_1", 1, "hi"))
	if err != nil {
		t.Fatal(err)
	}
	if !a2.Duplicate || a2.Sequence != a1.Sequence {
		t.Fatalf("resend: duplicate=%v seq %d vs %d", a2.Duplicate, a2.Sequence, a1.Sequence)
	}
	a3, _ := pub.PublishClient(ctx, userMessage("ac_2", 1, "hi"))
	if a3.Duplicate {
		t.Fatal("same stanza id in another conversation was taken for a duplicate")
	}
	st, _ := js.Stream(ctx, bus.StreamConversations)
	msg, err := st.GetMsg(ctx, a1.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Subject != "alicia.conv.ac_1.client.user_message" {
		t.Fatalf("subject = %q", msg.Subject)
	}
	if _, err := pub.PublishClient(ctx, userMessage("bad.id", 1, "x")); !errors.Is(err, bus.ErrNoConversation) {
		t.Fatalf("bad conversation id: err = %v", err)
	}
}

func TestRouter(t *testing.T) {
	_, js, pub := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cons, err := js.CreateOrUpdateConsumer(ctx, bus.StreamConversations, jetstream.ConsumerConfig{
		Durable: "router-test", AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: 3, AckWait: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	var handled, attempts atomic.Int32
	r := bus.NewRouter("router-test", bus.NewDeadLetters(js), zerolog.Nop(), bus.WithMaxDeliver(3),
		bus.WithBackoff(func(uint64) time.Duration { return 10 * time.Millisecond }))
	bus.Handle(r, func(ctx context.Context, env protocol.Envelope, body *protocol.UserMessage, d bus.Delivery) error {
		switch body.Content {
		case "ok":
			handled.Add(1)
			return nil
		case "flaky":
			if attempts.Add(1) < 2 {
				return errors.New("database away")
			}
			handled.Add(1)
			return nil
		case "poison":
			return bus.Permanent(errors.New("cannot apply"))
		case "panic":
			panic("boom")
		}
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, cons) }()

	for i, content := range []string{"ok", "flaky", "poison", "panic"} {
		if _, err := pub.PublishClient(ctx, userMessage("ac_r", int32(i+1), content)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.Publish(ctx, subjects.Client("ac_r", protocol.TypeUserMessage), []byte{0xc1, 0x00}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return handled.Load() == 2 }, "ok and flaky not handled")
	dlq, err := js.Stream(ctx, bus.StreamDeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		info, _ := dlq.Info(ctx)
		return info != nil && info.State.Msgs == 3
	}, "want 3 dead letters (poison, panic, malformed)")
	for seq := uint64(1); seq <= 3; seq++ {
		m, err := dlq.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.Get(bus.HeaderDLQReason) == "" || m.Header.Get(bus.HeaderDLQConsumer) != "router-test" {
			t.Errorf("dead letter %d headers = %v", seq, m.Header)
		}
	}
	if m, _ := dlq.GetMsg(ctx, 3); m != nil && m.Header.Get(bus.HeaderDLQCode) != "101" {
		t.Errorf("malformed envelope dead-lettered with code %q, want 101", m.Header.Get(bus.HeaderDLQCode))
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 0 || info.NumPending != 0 {
		t.Fatalf("consumer left pending=%d ack-pending=%d", info.NumPending, info.NumAckPending)
	}
}

func TestReplayAndStanzaIDs(t *testing.T) {
	nc, _, pub := setup(t)
	ctx := context.Background()
	var seqs []uint64
	for i := range 600 { // more than one replay batch
		cid := "ac_a"
		if i%3 == 0 {
			cid = "ac_b"
		}
		env := protocol.Envelope{ConversationID: cid, Type: protocol.TypeAssistantSentence,
			Body: &protocol.AssistantSentence{PreviousID: "am_x", ConversationID: cid, Sequence: int32(i + 1), Text: "s"}}
		ack, err := pub.PublishServer(ctx, env, "")
		if err != nil {
			t.Fatal(err)
		}
		if cid == "ac_a" {
			seqs = append(seqs, ack.Sequence)
		}
	}
	var got []uint64
	err := bus.Replay(ctx, nc, bus.StreamConversations, subjects.Conversation("ac_a"), 0, func(m bus.Stored) error {
		env, err := protocol.Decode(m.Data)
		if err != nil {
			return err
		}
		if err := bus.StampServer(&env, m.Sequence); err != nil {
			return err
		}
		if bus.SequenceOfStanza(env.StanzaID) != m.Sequence || env.StanzaID >= 0 {
			return fmt.Errorf("stanza %d for seq %d", env.StanzaID, m.Sequence)
		}
		got = append(got, m.Sequence)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(seqs) {
		t.Fatalf("replayed %d envelopes, want %d in order", len(got), len(seqs))
	}
	// Resume after a stanza id: exactly what follows.
	from := bus.SequenceOfStanza(-int32(seqs[100])) + 1
	n := 0
	if err := bus.Replay(ctx, nc, bus.StreamConversations, subjects.ServerAll("ac_a"), from, func(bus.Stored) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != len(seqs)-101 {
		t.Fatalf("resumed replay gave %d, want %d", n, len(seqs)-101)
	}
	if err := bus.Replay(ctx, nc, bus.StreamConversations, subjects.Conversation("ac_none"), 0, func(bus.Stored) error { return errors.New("no") }); err != nil {
		t.Fatalf("empty replay: %v", err)
	}
	if _, err := bus.ServerStanzaID(1 << 31); err == nil {
		t.Fatal("sequence beyond int32 accepted")
	}
}

func TestEnsureStreamLeavesAFittingStreamAlone(t *testing.T) {
	ns := natstest.Run(t)
	nc := natstest.Connect(t, ns)
	js := natstest.JetStream(t, nc)
	updates, err := nc.SubscribeSync("$JS.EVENT.ADVISORY.STREAM.UPDATED.T")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cfg := jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Storage: jetstream.FileStorage, MaxAge: time.Hour}
	if err := bus.EnsureStream(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, "T")
	if err != nil {
		t.Fatal(err)
	}
	created := s.CachedInfo().Config
	// The same config again: no update.
	if err := bus.EnsureStream(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if m, err := updates.NextMsg(100 * time.Millisecond); err == nil {
		t.Fatalf("a fitting stream was updated: %s", m.Data)
	}
	// A changed field is applied, the rest kept.
	cfg.MaxAge = 2 * time.Hour
	if err := bus.EnsureStream(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := updates.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("no update advisory for a changed stream: %v", err)
	}
	s, _ = js.Stream(ctx, "T")
	got := s.CachedInfo().Config
	if got.MaxAge != 2*time.Hour || got.Storage != jetstream.FileStorage || got.MaxMsgs != created.MaxMsgs {
		t.Fatalf("after update: %+v", got)
	}
}
