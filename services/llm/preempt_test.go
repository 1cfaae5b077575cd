package llm_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// preempt sends what the asr sends for a speculative transcript: the
// UserMessage it would become, on core NATS.
func (h *harness) preempt(cid, id, text string) {
	h.t.Helper()
	b, err := protocol.Encode(protocol.Envelope{ConversationID: cid, Type: protocol.TypeUserMessage,
		Meta: map[string]any{edge.MetaUserID: testUser}, Body: &protocol.UserMessage{ID: id, ConversationID: cid, Content: text}})
	if err != nil {
		h.t.Fatal(err)
	}
	// Core NATS: published before a replica subscribes (after its turn
	// consumers exist), the message is lost.
	subj := subjects.SpecPreempt(cid)
	testkit.Eventually(h.t, 10*time.Second, func() bool { return h.ns.GlobalAccount().SubscriptionInterest(subj) }, "an llm replica subscribed to %s", subj)
	if err := h.nc.Publish(subj, b); err != nil {
		h.t.Fatal(err)
	}
}

// speakAhead collects the first sentences the llm sends the tts ahead.
func (h *harness) speakAhead(cid string) func() []string {
	var mu sync.Mutex
	var got []string
	sub, err := h.nc.Subscribe(subjects.SpecSpeak(cid), func(m *nats.Msg) {
		env, err := protocol.Decode(m.Data)
		if err != nil {
			return
		}
		if s, ok := env.Body.(*protocol.AssistantSentence); ok {
			mu.Lock()
			got = append(got, s.Text)
			mu.Unlock()
		}
	})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = sub.Unsubscribe() })
	return func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), got...) }
}

func types(envs []seen) []string {
	var out []string
	for _, s := range envs {
		out = append(out, s.Env.Type.String())
	}
	return out
}

// A preemptive answer publishes nothing; when its turn is confirmed (the
// same message comes through the turn queue) the turn takes its stream: one
// model request, and exactly a normal turn's envelopes and rows. Its first
// sentence went to the tts ahead.
func TestPreemptiveAnswerConfirmed(t *testing.T) {
	h := newHarness(t)
	h.replica(h.config(h.fake))
	cid := h.conversation(protocol.ConfigurationFeaturesElemStreaming, protocol.ConfigurationFeaturesElemAudioOutput)
	w := h.watch(cid)
	ahead := h.speakAhead(cid)
	h.fake.Enqueue(fakeopenai.Turn{Text: fakeopenai.Words("It is sunny. Take a hat.")})

	id := protocol.NewID("am")
	h.preempt(cid, id, "What is the weather like?")
	testkit.Eventually(t, 10*time.Second, func() bool { return len(ahead()) == 1 }, "the first sentence sent ahead")
	if got := ahead(); got[0] != "It is sunny." {
		t.Fatalf("sent ahead %q", got)
	}
	if n := len(h.fake.Requests()); n != 1 {
		t.Fatalf("%d model requests before the turn, want 1", n)
	}
	time.Sleep(200 * time.Millisecond) // anything it published would be in the stream by now
	if got := types(w.all()); len(got) != 1 || got[0] != "Configuration" {
		t.Fatalf("envelopes before the turn: %v, want the Configuration only", got)
	}

	h.client(cid, &protocol.UserMessage{ID: id, ConversationID: cid, Content: "What is the weather like?"})
	sa, sents, _ := w.answered(t, id)
	var texts []string
	for _, s := range sents {
		texts = append(texts, s.Text)
	}
	if strings.Join(texts, "|") != "It is sunny.|Take a hat." {
		t.Fatalf("sentences %q", texts)
	}
	if n := len(h.fake.Requests()); n != 1 {
		t.Fatalf("%d model requests, want 1 (the turn took the preemptive stream)", n)
	}
	got := types(w.all())
	want := []string{"Configuration", "UserMessage", "StartAnswer", "AssistantSentence", "AssistantSentence"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("envelopes %v, want %v", got, want)
	}
	if r := h.row(t, sa.ID, func(r row) bool { return r.status == "completed" }); r.contents != "It is sunny. Take a hat." {
		t.Fatalf("row %+v", r)
	}
}

// Cancelled (the user spoke again) or built on other words than the turn's:
// the preemptive answer leaves nothing, and the turn asks the model with
// the whole utterance.
func TestPreemptiveAnswerDropped(t *testing.T) {
	h := newHarness(t)
	h.replica(h.config(h.fake))
	cid := h.conversation()
	w := h.watch(cid)
	for _, c := range []struct {
		name   string
		cancel bool
	}{{"cancelled", true}, {"other words", false}} {
		t.Run(c.name, func(t *testing.T) {
			before := len(h.fake.Requests())
			h.fake.Enqueue(fakeopenai.Turn{Text: []string{"Preemptive answer."}}, fakeopenai.Turn{Text: []string{"Answer to all of it."}})
			id := protocol.NewID("am")
			h.preempt(cid, id, "What is the")
			testkit.Eventually(t, 10*time.Second, func() bool { return len(h.fake.Requests()) == before+1 }, "the preemptive request")
			n := len(w.all())
			if c.cancel {
				ev := &protocol.TurnEvent{ConversationID: cid, Kind: protocol.TurnEventKindPreemptCancelled, UtteranceID: &id,
					Reason: protocol.Ptr("speech_resumed"), Timestamp: time.Now().UnixMilli()}
				if _, err := h.pub.PublishAgent(context.Background(), protocol.New(cid, ev), ""); err != nil {
					t.Fatal(err)
				}
			}
			h.client(cid, &protocol.UserMessage{ID: id, ConversationID: cid, Content: "What is the time in Lisbon?"})
			_, sents, _ := w.answered(t, id)
			if len(sents) != 1 || sents[0].Text != "Answer to all of it." {
				t.Fatalf("sentences %+v", sents)
			}
			reqs := h.fake.Requests()
			if len(reqs) != before+2 {
				t.Fatalf("%d model requests, want 2", len(reqs)-before)
			}
			last := reqs[len(reqs)-1].Messages
			if q := last[len(last)-1].Content; q != "What is the time in Lisbon?" {
				t.Fatalf("the turn asked with %q", q)
			}
			got := types(w.all()[n:])
			if c.cancel {
				if got[0] != "TurnEvent" {
					t.Fatalf("envelopes %v, want the TurnEvent first", got)
				}
				got = got[1:]
			}
			if want := "UserMessage,StartAnswer,AssistantSentence"; strings.Join(got, ",") != want {
				t.Fatalf("envelopes %v, want %s", got, want)
			}
			for _, s := range w.all() {
				if a, ok := s.Env.Body.(*protocol.AssistantSentence); ok && strings.Contains(a.Text, "Preemptive") {
					t.Fatal("the preemptive answer reached the stream")
				}
			}
		})
	}
}
