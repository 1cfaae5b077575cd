package voice_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/voiceclient"
	roomagent "github.com/alicia-voice/alicia/services/room-agent"
)

// Hearing the person, not the room: with the neural VAD (the harness's
// default) noise over an answer does not lower it, a backchannel lets it go
// on, its own echo does not interrupt it, and a real interruption in noise
// still stops it.

const longAnswer = "The forecast for Paris tomorrow is mostly sunny with a few clouds. " +
	"Temperatures will climb to about twenty degrees. In the evening the sky stays clear."

// answering asks the weather and waits until a second and a half of the
// answer was heard (past the echo canceller's first second, when a frame
// quieter than the answer is taken for its echo); it returns the answer's
// StartAnswer.
func answering(t *testing.T, s *stack, u *voiceclient.User) *protocol.StartAnswer {
	t.Helper()
	u.Say(voiceclient.Speech(t, "Tell me about the weather in Paris."))
	sa := u.WaitFor(20*time.Second, "no StartAnswer", isType(protocol.TypeStartAnswer)).Body.(*protocol.StartAnswer)
	testkit.Eventually(t, 20*time.Second, func() bool {
		n, _, _ := voiceclient.Loud(u.Heard(), time.Time{})
		return n >= 75
	}, "the agent never spoke")
	return sa
}

// playedWhole waits until every sentence of answer id is recorded played.
func playedWhole(t *testing.T, s *stack, id string, sentences int) {
	t.Helper()
	testkit.EventuallyNoError(t, 30*time.Second, func() error {
		var all, played int
		if err := s.pool.QueryRow(context.Background(), `SELECT count(*), count(*) FILTER (WHERE playout_status = 'played')
			FROM alicia_sentences WHERE message_id = $1`, id).Scan(&all, &played); err != nil {
			return err
		}
		if all != sentences || played != sentences {
			var st string
			_ = s.pool.QueryRow(context.Background(), `SELECT string_agg(coalesce(playout_status::text,'-'), ',' ORDER BY sentence_sequence_number) FROM alicia_sentences WHERE message_id = $1`, id).Scan(&st)
			return errorf("%d sentences, %d played (%s)", all, played, st)
		}
		return nil
	}, "the answer was not played to its end")
}

// noStop fails when a ControlStop is on the conversation's stream.
func noStop(t *testing.T, s *stack, cid string) {
	t.Helper()
	st, err := s.js.Stream(context.Background(), "CONVERSATIONS")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetLastMsgForSubject(context.Background(), subjects.Client(cid, protocol.TypeControlStop)); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("ControlStop on the stream (err %v)", err)
	}
}

// turnEvents are the conversation's TurnEvents of kind.
func turnEvents(t testing.TB, s *stack, cid string, kind protocol.TurnEventKind) []*protocol.TurnEvent {
	t.Helper()
	var out []*protocol.TurnEvent
	for _, env := range s.stream(t, cid) {
		if ev, ok := env.Body.(*protocol.TurnEvent); ok && ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

// fanNoise is d of a fan's hum (50 Hz and its harmonics) with broadband
// noise, loud (about -20 dBFS), 16 kHz.
func fanNoise(d time.Duration, seed uint64) []int16 {
	white := noiseBurst(d, seed)
	out := make([]int16, len(white))
	for i := range out {
		x := float64(i) / 16000
		hum := 3000*math.Sin(2*math.Pi*50*x) + 1500*math.Sin(2*math.Pi*100*x) + 800*math.Sin(2*math.Pi*150*x)
		out[i] = int16(hum + 0.4*float64(white[i]))
	}
	return out
}

// TestNoiseDuringAnAnswer: a fan, then bursts of noise (a door, a cough, the
// ones that barge in with the energy VAD: TestFalseInterruptionResumes)
// over the answer: no barge-in at all, the answer is never lowered, and it
// is played whole.
func TestNoiseDuringAnAnswer(t *testing.T) {
	s := newStack(t, options{answer: longAnswer})
	s.speech.SetTranscriber(fakeopenai.NoWordsInNoise(nil))
	cid := s.conversation()
	u := voiceclient.Join(t, s.lk.URL, s.token(cid), true)
	u.Configure(voiceConfig(cid), cid)
	sa := answering(t, s, u)
	before := counter(t, "alicia_voice_barge_ins_total")
	u.Say(fanNoise(time.Second, 3))
	for i := range 3 {
		u.Say(noiseBurst(400*time.Millisecond, uint64(10+i)))
		u.Say(make([]int16, 3200)) // 200 ms apart
	}
	u.WaitSent()
	playedWhole(t, s, sa.ID, 3)
	if got := counter(t, "alicia_voice_barge_ins_total"); got != before {
		t.Fatalf("%v barge-ins on noise alone", got-before)
	}
	if evs := turnEvents(t, s, cid, protocol.TurnEventKindFalseInterruption); len(evs) != 0 {
		t.Fatalf("%d false interruptions: the noise barged in", len(evs))
	}
	noStop(t, s, cid)
}

// TestBackchannelDuringAnAnswer: "mm-hmm" over the answer lowers it while it
// is decided, then it goes on and is played whole; a TurnEvent backchannel
// says what was said; no ControlStop, and no user message of it.
func TestBackchannelDuringAnAnswer(t *testing.T) {
	s := newStack(t, options{answer: longAnswer})
	s.speech.SetTranscriber(backchannelOrQuestion)
	cid := s.conversation()
	u := voiceclient.Join(t, s.lk.URL, s.token(cid), true)
	u.Configure(voiceConfig(cid), cid)
	sa := answering(t, s, u)
	u.Say(voiceclient.Speech(t, "Mm hmm."))
	var ev *protocol.TurnEvent
	testkit.EventuallyNoError(t, 20*time.Second, func() error {
		evs := turnEvents(t, s, cid, protocol.TurnEventKindBackchannel)
		if len(evs) != 1 {
			return errorf("%d backchannels", len(evs))
		}
		ev = evs[0]
		return nil
	}, "no TurnEvent backchannel")
	if ev.MessageID == nil || *ev.MessageID != sa.ID || ev.Transcript == nil || *ev.Transcript != "Mm-hmm." || ev.HeldMs == nil {
		t.Fatalf("TurnEvent %+v", ev)
	}
	playedWhole(t, s, sa.ID, 3)
	noStop(t, s, cid)
	users := 0
	for _, env := range s.stream(t, cid) {
		if _, ok := env.Body.(*protocol.UserMessage); ok {
			users++
		}
	}
	if users != 1 {
		t.Fatalf("%d user messages, want the question only", users)
	}
}

// backchannelOrQuestion hears the weather question in long audio and
// "Mm-hmm." in short audio (the fake ASR tells them apart by length).
var backchannelOrQuestion = fakeopenai.NoWordsInNoise(func(r fakeopenai.TranscriptionRequest) fakeopenai.Transcript {
	if r.Duration < 1500*time.Millisecond {
		return fakeopenai.Transcript{Text: "Mm-hmm."}
	}
	return fakeopenai.Transcript{Text: "Tell me about the weather in Paris."}
})

// TestEchoDuringAnAnswer: the person's speakers play the answer into their
// microphone (150 ms later, 10 dB down): it does not interrupt it. The
// canceller mutes the echo once it has found its delay; an echo it misses
// (found late on a loaded machine, where the two clocks it compares drift
// apart) is heard — the fake ASR, like Whisper, hears the answer's words
// in it — and told from an interruption by those words: every barge-in
// there was is settled as echo, the answer plays to its end, no ControlStop,
// and the echo becomes no user message. How often the canceller alone
// keeps the echo from the VAD is BenchmarkEchoFalseOnsets' figure.
func TestEchoDuringAnAnswer(t *testing.T) {
	s := newStack(t, options{answer: longAnswer})
	s.speech.SetTranscriber(s.speech.HearsItsOwnSpeech(nil))
	cid := s.conversation()
	u := voiceclient.Join(t, s.lk.URL, s.token(cid), true)
	u.Configure(voiceConfig(cid), cid)
	u.Say(voiceclient.Speech(t, "Tell me about the weather in Paris."))
	u.WaitSent()
	before := counter(t, "alicia_voice_barge_ins_total")
	u.Echo(150*time.Millisecond, 10)
	sa := u.WaitFor(20*time.Second, "no StartAnswer", isType(protocol.TypeStartAnswer)).Body.(*protocol.StartAnswer)
	playedWhole(t, s, sa.ID, 3)
	noStop(t, s, cid)
	bargeIns := counter(t, "alicia_voice_barge_ins_total") - before
	testkit.EventuallyNoError(t, 10*time.Second, func() error {
		var echoes int
		for _, ev := range turnEvents(t, s, cid, protocol.TurnEventKindFalseInterruption) {
			if ev.Reason != nil && *ev.Reason == "echo" {
				echoes++
			}
		}
		if float64(echoes) != bargeIns {
			return errorf("%v barge-ins on the answer's own echo, %d settled as echo", bargeIns, echoes)
		}
		return nil
	}, "a barge-in on the echo not settled as echo")
	var users int
	for _, env := range s.stream(t, cid) {
		if _, ok := env.Body.(*protocol.UserMessage); ok {
			users++
		}
	}
	if users != 1 {
		t.Fatalf("%d user messages, want the question's alone (the echo answered)", users)
	}
	t.Logf("barge-ins on the echo (the canceller missed it): %v", bargeIns)
}

// TestInterruptionInNoise: a real interruption spoken over a fan still
// stops the answer.
func TestInterruptionInNoise(t *testing.T) {
	s := newStack(t, options{answer: longAnswer, agent: func(c *roomagent.Config) { c.BargeInMin = 200 * time.Millisecond }})
	s.speech.SetTranscriber(fakeopenai.NoWordsInNoise(func(r fakeopenai.TranscriptionRequest) fakeopenai.Transcript {
		return fakeopenai.Transcript{Text: "Wait, what about Sunday?"}
	}))
	cid := s.conversation()
	u := voiceclient.Join(t, s.lk.URL, s.token(cid), true)
	u.Configure(voiceConfig(cid), cid)
	sa := answering(t, s, u)
	speech := voiceclient.Speech(t, "Wait, what about Sunday?")
	fan := fanNoise(time.Duration(len(speech)+1600)*time.Second/16000, 5)
	mixed := make([]int16, len(speech))
	for i := range mixed {
		// The fan about 10 dB under the speech.
		mixed[i] = int16(max(-32768, min(32767, int(speech[i])+int(fan[i])/3)))
	}
	u.Say(mixed)
	u.WaitFor(20*time.Second, "the answer was not stopped", func(e protocol.Envelope) bool {
		p, ok := e.Body.(*protocol.SentencePlayout)
		return ok && p.MessageID == sa.ID && p.Status == protocol.SentencePlayoutStatusInterrupted
	})
}
