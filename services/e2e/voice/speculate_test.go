package voice_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/pkg/testkit/voiceclient"
	roomagent "github.com/alicia-voice/alicia/services/room-agent"
)

// asrJobs collects the conversation's ASR jobs as published (a core
// subscription sees every JetStream publish).
func (s *stack) asrJobs(cid string) func() []*protocol.ASRJob {
	var mu sync.Mutex
	var jobs []*protocol.ASRJob
	sub, err := s.nc.Subscribe(subjects.ASRJob(cid), func(m *nats.Msg) {
		if env, err := protocol.Decode(m.Data); err == nil {
			if j, ok := env.Body.(*protocol.ASRJob); ok {
				mu.Lock()
				jobs = append(jobs, j)
				mu.Unlock()
			}
		}
	})
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = sub.Unsubscribe() })
	return func() []*protocol.ASRJob {
		mu.Lock()
		defer mu.Unlock()
		return append([]*protocol.ASRJob(nil), jobs...)
	}
}

// record is what a conversation left: the types of its stream's envelopes
// (partial transcriptions and Configurations left out: how many depends on
// timing — the client configures again when the agent asks, if the agent's
// question crossed its first Configuration), sorted, and its message and
// sentence rows.
func (s *stack) record(t *testing.T, cid string) (types []string, rows []string) {
	t.Helper()
	for _, e := range s.stream(t, cid) {
		if tr, ok := e.Body.(*protocol.Transcription); ok && !tr.Final || e.Type == protocol.TypeConfiguration {
			continue
		}
		types = append(types, e.Type.String())
	}
	sort.Strings(types)
	ctx := context.Background()
	r, err := s.pool.Query(ctx, `SELECT message_role::text, contents, completion_status::text FROM alicia_messages WHERE conversation_id = $1 ORDER BY created_at`, cid)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for r.Next() {
		var role, contents, status string
		if err := r.Scan(&role, &contents, &status); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, role+"|"+contents+"|"+status)
	}
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM alicia_sentences s JOIN alicia_messages m ON m.id = s.message_id WHERE m.conversation_id = $1`, cid).Scan(&n); err != nil {
		t.Fatal(err)
	}
	rows = append(rows, fmt.Sprintf("sentences %d", n))
	return types, rows
}

// stream reads every envelope of a conversation from CONVERSATIONS.
func (s *stack) stream(t testing.TB, cid string) []protocol.Envelope {
	t.Helper()
	return natstest.Stored(t, s.js, bus.StreamConversations, subjects.Conversation(cid))
}

// turn speaks pcm, waits for the whole answer and its playout records, and
// returns the final transcription.
func turnOf(t *testing.T, s *stack, u *voiceclient.User, pcm []int16) *protocol.Transcription {
	t.Helper()
	n := len(u.Received())
	u.Say(pcm)
	final := u.WaitFor(20*time.Second, "no final transcription", func(e protocol.Envelope) bool {
		tr, ok := e.Body.(*protocol.Transcription)
		return ok && tr.Final
	}).Body.(*protocol.Transcription)
	testkit.Eventually(t, 20*time.Second, func() bool {
		played := 0
		for _, e := range u.Received()[n:] {
			if p, ok := e.Body.(*protocol.SentencePlayout); ok && p.Status == protocol.SentencePlayoutStatusPlayed {
				played++
			}
		}
		return played == 2
	}, "the answer played")
	return final
}

// A confirmed speculative turn: the final ASR job carries the speculative
// transcript (nothing transcribed after the silence), the answer comes from
// the preemptive one (one model request), and the conversation's record —
// envelopes and rows — is exactly that of the same turn with speculation
// off.
func TestSpeculativeTurnConfirmed(t *testing.T) {
	const q = "What is the weather like in Paris tomorrow?"
	records := map[bool][2][]string{}
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprintf("speculation=%v", on), func(t *testing.T) {
			s := newStack(t, options{answer: "It will be sunny. Enjoy your day!", agent: func(c *roomagent.Config) { c.Speculation = on }})
			s.speech.SetTranscriber(func(fakeopenai.TranscriptionRequest) fakeopenai.Transcript { return fakeopenai.Transcript{Text: q} })
			cid := s.conversation()
			jobs := s.asrJobs(cid)
			u := voiceclient.Join(t, s.lk.URL, s.token(cid), true)
			u.Configure(voiceConfig(cid), cid)
			final := turnOf(t, s, u, voiceclient.Speech(t, q))
			if final.Text != q {
				t.Fatalf("final transcription %q", final.Text)
			}
			var spec, fin []*protocol.ASRJob
			for _, j := range jobs() {
				switch {
				case j.Speculative != nil && *j.Speculative:
					spec = append(spec, j)
				case j.Final:
					fin = append(fin, j)
				}
			}
			if len(fin) != 1 {
				t.Fatalf("%d final jobs", len(fin))
			}
			if on {
				if len(spec) == 0 || fin[0].Transcript == nil || *fin[0].Transcript != q {
					t.Fatalf("speculative jobs %d, final job transcript %v: want the speculative transcript on the final job", len(spec), fin[0].Transcript)
				}
				if n := len(s.chat.Requests()); n != 1 {
					t.Fatalf("%d model requests, want 1 (the preemptive answer was used)", n)
				}
			} else if len(spec) != 0 || fin[0].Transcript != nil {
				t.Fatalf("speculation off: %d speculative jobs, final transcript %v", len(spec), fin[0].Transcript)
			}
			// Let the playout records and audio rows land.
			var types, rows []string
			testkit.EventuallyNoError(t, 10*time.Second, func() error {
				types, rows = s.record(t, cid)
				if want := "sentences 2"; rows[len(rows)-1] != want {
					return errorf("rows %v", rows)
				}
				return nil
			}, "the record")
			records[on] = [2][]string{types, rows}
		})
	}
	off, on := records[false], records[true]
	if fmt.Sprint(off) != fmt.Sprint(on) {
		t.Fatalf("record with speculation:\n%v\nwithout:\n%v", on, off)
	}
	if strings.Contains(fmt.Sprint(on[0]), "TurnEvent") {
		t.Fatal("a confirmed turn left a TurnEvent")
	}
}

// A cancelled one: the user pauses inside the sentence, long enough for a
// speculative transcript and a preemptive answer, then goes on. The
// preemptive answer leaves nothing but the TurnEvent; the answer is to the
// whole utterance.
func TestSpeculativeTurnCancelled(t *testing.T) {
	s := newStack(t, options{answer: "It will be sunny. Enjoy your day!"})
	s.speech.SetTranscriber(func(r fakeopenai.TranscriptionRequest) fakeopenai.Transcript {
		if r.Duration < 1500*time.Millisecond {
			return fakeopenai.Transcript{Text: "What is the"}
		}
		return fakeopenai.Transcript{Text: "What is the weather like in Paris tomorrow?"}
	})
	s.chat.On(fakeopenai.LastUserContains("What is the"), fakeopenai.Turn{Text: []string{"Preemptive words. Never heard."}})
	cid := s.conversation()
	u := voiceclient.Join(t, s.lk.URL, s.token(cid), true)
	u.Configure(voiceConfig(cid), cid)
	// 300 ms of silence between the words (espeak-ng's own silence at the
	// ends of each part trimmed): past the 100 ms that starts a speculative
	// transcription, well within the 500 ms that ends a turn.
	pause := make([]int16, 16000*300/1000)
	pcm := append(append(trim(voiceclient.Speech(t, "What is the")), pause...), trim(voiceclient.Speech(t, "weather like in Paris tomorrow?"))...)
	final := turnOf(t, s, u, pcm)
	if final.Text != "What is the weather like in Paris tomorrow?" {
		t.Fatalf("final transcription %q", final.Text)
	}
	var events []*protocol.TurnEvent
	var starts int
	for _, e := range s.stream(t, cid) {
		switch b := e.Body.(type) {
		case *protocol.TurnEvent:
			events = append(events, b)
		case *protocol.StartAnswer:
			starts++
		case *protocol.AssistantSentence:
			if strings.Contains(b.Text, "Preemptive") {
				t.Fatal("the preemptive answer reached the stream")
			}
		}
	}
	if len(events) == 0 || events[0].Kind != protocol.TurnEventKindPreemptCancelled || events[0].UtteranceID == nil || *events[0].UtteranceID != final.ID {
		t.Fatalf("turn events %+v, want preempt_cancelled for %s", events, final.ID)
	}
	if starts != 1 {
		t.Fatalf("%d answers started", starts)
	}
	for _, e := range u.Received() {
		if _, ok := e.Body.(*protocol.TurnEvent); ok {
			t.Fatal("a TurnEvent reached the client")
		}
	}
	_, rows := s.record(t, cid)
	want := fmt.Sprint([]string{"user|What is the weather like in Paris tomorrow?|completed", "assistant|It will be sunny. Enjoy your day!|completed", "sentences 2"})
	if fmt.Sprint(rows) != want {
		t.Fatalf("rows %v, want %s", rows, want)
	}
	reqs := s.chat.Requests()
	last := reqs[len(reqs)-1].Messages
	if q := last[len(last)-1].Content; q != final.Text {
		t.Fatalf("the answer was asked with %q", q)
	}
}

// trim cuts the silence at both ends of speech.
func trim(pcm []int16) []int16 {
	loud := func(v int16) bool { return v > 300 || v < -300 }
	i, j := 0, len(pcm)
	for i < j && !loud(pcm[i]) {
		i++
	}
	for j > i && !loud(pcm[j-1]) {
		j--
	}
	return pcm[i:j]
}
