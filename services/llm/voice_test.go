package llm_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/subjects"
)

// StartAnswer says text+voice when the client's features include
// audio_output, text otherwise; a new Configuration is honoured at once.
func TestAnswerType(t *testing.T) {
	h := newHarness(t)
	h.replica(h.config(h.fake))
	cases := []struct {
		name      string
		features  []protocol.ConfigurationFeaturesElem
		want      protocol.StartAnswerAnswerType
		streaming bool
	}{
		{"no features list", nil, protocol.StartAnswerAnswerTypeText, true},
		{"streaming", []protocol.ConfigurationFeaturesElem{protocol.ConfigurationFeaturesElemStreaming}, protocol.StartAnswerAnswerTypeText, true},
		{"streaming and audio output", []protocol.ConfigurationFeaturesElem{protocol.ConfigurationFeaturesElemStreaming,
			protocol.ConfigurationFeaturesElemAudioOutput}, protocol.StartAnswerAnswerTypeTextVoice, true},
		{"audio output without streaming", []protocol.ConfigurationFeaturesElem{protocol.ConfigurationFeaturesElemAudioOutput},
			protocol.StartAnswerAnswerTypeTextVoice, false},
	}
	ask := func(t *testing.T, cid string, w *watcher, streaming bool) *protocol.StartAnswer {
		t.Helper()
		h.fake.Enqueue(fakeopenai.Text("Hello there."))
		uid := h.say(cid, "Hi?")
		var sa *protocol.StartAnswer
		w.until(t, 15*time.Second, "answer to "+uid, func(envs []seen) bool {
			sa = answerOf(envs, uid)
			if sa == nil {
				return false
			}
			if streaming {
				return finished(envs, sa.ID)
			}
			for _, m := range bodies[*protocol.AssistantMessage](envs) {
				if m.ID == sa.ID {
					return true
				}
			}
			return false
		})
		return sa
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cid := h.conversation(c.features...)
			w := h.watch(cid)
			if sa := ask(t, cid, w, c.streaming); sa.AnswerType == nil || *sa.AnswerType != c.want {
				t.Fatalf("answerType = %v, want %s", sa.AnswerType, c.want)
			}
		})
	}
	t.Run("a new Configuration turns the voice off", func(t *testing.T) {
		cid := h.conversation(protocol.ConfigurationFeaturesElemStreaming, protocol.ConfigurationFeaturesElemAudioOutput)
		w := h.watch(cid)
		if sa := ask(t, cid, w, true); *sa.AnswerType != protocol.StartAnswerAnswerTypeTextVoice {
			t.Fatalf("answerType = %s", *sa.AnswerType)
		}
		h.client(cid, &protocol.Configuration{ConversationID: &cid, Features: []protocol.ConfigurationFeaturesElem{protocol.ConfigurationFeaturesElemStreaming}})
		if sa := ask(t, cid, w, true); *sa.AnswerType != protocol.StartAnswerAnswerTypeText {
			t.Fatalf("answerType after the new Configuration = %s", *sa.AnswerType)
		}
	})
}

// agent publishes an internal envelope on alicia.conv.{cid}.agent.{type}, as the room-agent does.
func (h *harness) agent(cid string, body protocol.Body) uint64 {
	h.t.Helper()
	data, err := protocol.Encode(protocol.New(cid, body))
	if err != nil {
		h.t.Fatal(err)
	}
	ack, err := h.js.Publish(context.Background(), subjects.Agent(cid, body.MessageType()), data)
	if err != nil {
		h.t.Fatal(err)
	}
	return ack.Sequence
}

// After a barge-in the next turn's context holds only what the user heard:
// the answer is generated whole, the room-agent records sentence 1 played
// and 2 and 3 unplayed, stops the turn (ControlStop speech), and the user's
// next message is answered from the history persistence cut to sentence 1
// (history.get asked again: the branch the replica remembered is stale).
func TestBargeInNextTurnHearsOnlyWhatWasPlayed(t *testing.T) {
	h := newHarness(t)
	h.replica(h.config(h.fake))
	var asked atomic.Int64
	sub, err := h.nc.Subscribe(rpc.HistorySubject, func(*nats.Msg) { asked.Add(1) }) // sees every request
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	for _, targeted := range []bool{true, false} {
		t.Run(fmt.Sprintf("targeted=%v", targeted), func(t *testing.T) {
			cid := h.conversation(protocol.ConfigurationFeaturesElemStreaming, protocol.ConfigurationFeaturesElemAudioOutput)
			w := h.watch(cid)
			h.fake.Enqueue(fakeopenai.Text("Warm up."))
			w.answered(t, h.say(cid, "Hello?"))
			h.fake.Enqueue(fakeopenai.Text("One. Two. Three."))
			uid := h.say(cid, "Count to three.")
			sa, sents, _ := w.answered(t, uid)
			if len(sents) != 3 {
				t.Fatalf("%d sentences, want 3", len(sents))
			}
			for i, status := range []protocol.SentencePlayoutStatus{protocol.SentencePlayoutStatusPlayed,
				protocol.SentencePlayoutStatusUnplayed, protocol.SentencePlayoutStatusUnplayed} {
				var played int32
				if status == protocol.SentencePlayoutStatusPlayed {
					played = 800
				}
				h.agent(cid, &protocol.SentencePlayout{ConversationID: cid, MessageID: sa.ID, SentenceID: *sents[i].ID,
					Sequence: sents[i].Sequence, Status: status, PlayedMs: played})
			}
			stop := &protocol.ControlStop{ConversationID: cid, StopType: protocol.Ptr(protocol.ControlStopStopTypeSpeech), Reason: protocol.Ptr("barge-in")}
			if targeted {
				stop.TargetID = &sa.ID
			}
			h.client(cid, stop)

			before := asked.Load()
			h.fake.Enqueue(fakeopenai.Text("Okay."))
			next := h.say(cid, "Wait, what?")
			w.answered(t, next)
			if asked.Load() == before {
				t.Fatal("history.get not asked after the barge-in: the remembered branch was used")
			}
			reqs := h.fake.Requests()
			var sent []string
			for _, m := range reqs[len(reqs)-1].Messages[1:] {
				sent = append(sent, m.Role+":"+m.Content)
			}
			want := []string{"user:Hello?", "assistant:Warm up.", "user:Count to three.", "assistant:One.", "user:Wait, what?"}
			if strings.Join(sent, "\n") != strings.Join(want, "\n") {
				t.Fatalf("context sent:\n%s\nwant:\n%s", strings.Join(sent, "\n"), strings.Join(want, "\n"))
			}
			var generated string
			r := h.row(t, sa.ID, func(r row) bool { return r.contents == "One." })
			if err := h.pool.QueryRow(context.Background(), `SELECT generated_contents FROM alicia_messages WHERE id = $1`, sa.ID).Scan(&generated); err != nil {
				t.Fatal(err)
			}
			if r.status != "completed" || generated != "One. Two. Three." || r.interrupted != targeted {
				t.Fatalf("answer row %+v generated %q; want completed, the whole answer kept, interrupted when the stop named it", r, generated)
			}
		})
	}
}
