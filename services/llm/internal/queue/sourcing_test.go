package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/services/llm/internal/queue"
)

// runCluster starts n JetStream servers routed to each other on 127.0.0.1.
func runCluster(t *testing.T, n int) []*server.Server { return natstest.RunCluster(t, n, "q") }

func leaderOf(js jetstream.JetStream, stream string) (string, *jetstream.StreamInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return "", nil, err
	}
	info := s.CachedInfo()
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return "", nil, errors.New("no leader")
	}
	return info.Cluster.Leader, info, nil
}

// TestSourceWatchAfterLeaderLoss: on three servers with R3 streams, the
// server leading CONVERSATIONS (and so holding LLM_TURNS's source consumer)
// shuts down, while another server leads LLM_TURNS ("apart") or while it
// leads LLM_TURNS too ("together": both streams elect, and LLM_TURNS's new
// leader may try its source before CONVERSATIONS has a leader). With two
// replicas' source watches running, a user message published after the
// loss is in LLM_TURNS within 5 s (nats-server alone: 10–20 s apart), and
// LLM_TURNS holds every user message of CONVERSATIONS exactly once, before
// and after the loss.
func TestSourceWatchAfterLeaderLoss(t *testing.T) {
	for _, together := range []bool{false, true} {
		name := "apart"
		if together {
			name = "together"
		}
		t.Run(name, func(t *testing.T) { sourceWatchAfterLeaderLoss(t, together) })
	}
}

func sourceWatchAfterLeaderLoss(t *testing.T, together bool) {
	servers := runCluster(t, 3)
	var urls []string
	for _, s := range servers {
		urls = append(urls, s.ClientURL())
	}
	connect := func() (*nats.Conn, jetstream.JetStream) {
		nc, err := nats.Connect(strings.Join(urls, ","), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		return nc, js
	}
	nc, js := connect()
	ctx := t.Context()
	testkit.EventuallyNoError(t, 30*time.Second, func() error {
		return bus.EnsureStreams(ctx, js, bus.StreamsConfig{Replicas: 3})
	}, "streams")
	// A cluster may still be placing the new stream's replicas: tried again.
	testkit.EventuallyNoError(t, 30*time.Second, func() error {
		_, err := queue.Ensure(ctx, js, queue.Config{Partitions: 2, AckWait: 30 * time.Second, MaxDeliver: 5, Replicas: 3, MaxAge: time.Hour})
		return err
	}, "the turn queue")
	var watches []*queue.SourceWatch
	for range 2 {
		wnc, wjs := connect()
		w := &queue.SourceWatch{NC: wnc, JS: wjs, Log: zerolog.Nop()}
		watches = append(watches, w)
		wctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = w.Run(wctx) }()
		t.Cleanup(func() { cancel(); <-done })
	}

	pub := bus.NewPublisher(js)
	sent := 0
	say := func() {
		t.Helper()
		sent++
		cid := fmt.Sprintf("ac_watch%d", sent%5)
		env := protocol.Envelope{ConversationID: cid, Type: protocol.TypeUserMessage,
			Body: &protocol.UserMessage{ID: fmt.Sprintf("am_%d", sent), ConversationID: cid, Content: "hi"}}
		// Retried until stored: a retry after a lost ack may store it twice
		// in CONVERSATIONS, which the comparison below takes as it is.
		testkit.EventuallyNoError(t, 30*time.Second, func() error {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_, err := pub.PublishClient(pctx, env)
			return err
		}, "publishing %d", sent)
	}
	turns := func() uint64 {
		_, info, err := leaderOf(js, queue.Stream)
		if err != nil {
			return 0
		}
		return info.State.Msgs
	}

	say()
	testkit.Eventually(t, 30*time.Second, func() bool { return turns() == 1 }, "the first message sourced")
	// LLM_TURNS led by another server than CONVERSATIONS (apart) or by
	// the same (together).
	convLeader, _, err := leaderOf(js, bus.StreamConversations)
	if err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyNoError(t, 30*time.Second, func() error {
		l, info, err := leaderOf(js, queue.Stream)
		if err != nil {
			return err
		}
		if (l == convLeader) != together {
			want := convLeader
			if !together {
				want = servers[0].Name()
				if want == convLeader {
					want = servers[1].Name()
				}
			}
			req, _ := json.Marshal(map[string]any{"placement": map[string]string{"preferred": want}})
			_, _ = nc.Request(queue.StepDownSubject, req, 2*time.Second)
			return fmt.Errorf("LLM_TURNS led by %s, want %s (CONVERSATIONS: %s)", l, want, convLeader)
		}
		// A new leader may answer before it reports its source.
		if len(info.Sources) == 0 {
			return fmt.Errorf("LLM_TURNS led by %s reports no source yet", l)
		}
		if a := info.Sources[0].Active; a < 0 || a > time.Second {
			return fmt.Errorf("source active %s", a)
		}
		return nil
	}, "LLM_TURNS led where wanted, sourcing")
	say()
	testkit.Eventually(t, 30*time.Second, func() bool { return turns() == 2 }, "sourced before the loss")

	var victim *server.Server
	for _, s := range servers {
		if s.Name() == convLeader {
			victim = s
		}
	}
	turnsLeader, _, _ := leaderOf(js, queue.Stream)
	killed := time.Now()
	victim.Shutdown()
	victim.WaitForShutdown()
	say()
	published := time.Since(killed)
	testkit.Eventually(t, 30*time.Second, func() bool { return turns() == 3 }, "sourced after the loss")
	recovered := time.Since(killed)
	t.Logf("shut down %s (CONVERSATIONS), LLM_TURNS led by %s: the message published %s after the loss was in LLM_TURNS %s after it; step-downs %d, %d",
		convLeader, turnsLeader, published.Round(time.Millisecond), recovered.Round(time.Millisecond), watches[0].StepDowns(), watches[1].StepDowns())
	if recovered > 5*time.Second {
		t.Errorf("LLM_TURNS sourced again %s after the loss, want within 5 s", recovered)
	}
	for range 20 {
		say()
	}

	// Every user message of CONVERSATIONS is in LLM_TURNS once.
	var want []uint64
	testkit.EventuallyNoError(t, 30*time.Second, func() error {
		want = nil
		cons, err := js.OrderedConsumer(ctx, bus.StreamConversations, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{subjects.AllOfType(subjects.OriginClient, protocol.TypeUserMessage)}})
		if err != nil {
			return err
		}
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return err
		}
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				return err
			}
			want = append(want, md.Sequence.Stream)
		}
		if len(want) < sent {
			return fmt.Errorf("%d of %d messages read", len(want), sent)
		}
		return nil
	}, "reading CONVERSATIONS")
	testkit.EventuallyNoError(t, 30*time.Second, func() error {
		_, info, err := leaderOf(js, queue.Stream)
		if err != nil {
			return err
		}
		if info.State.Msgs != uint64(len(want)) {
			return fmt.Errorf("LLM_TURNS holds %d messages, CONVERSATIONS %d user messages", info.State.Msgs, len(want))
		}
		return nil
	}, "LLM_TURNS caught up")
	s, err := js.Stream(ctx, queue.Stream)
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint64]int{}
	info := s.CachedInfo()
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		src, err := queue.SourceSequence(m.Header.Get(queue.SourceHeader))
		if err != nil {
			t.Fatal(err)
		}
		got[src]++
	}
	for _, seq := range want {
		if got[seq] != 1 {
			t.Errorf("CONVERSATIONS %d is in LLM_TURNS %d times", seq, got[seq])
		}
	}
	if len(got) != len(want) {
		t.Errorf("LLM_TURNS holds %d source sequences, want %d", len(got), len(want))
	}
}
