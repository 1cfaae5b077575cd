package agent

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
)

// answering is a room (no LiveKit) whose tracker and player run on an
// in-process JetStream, playing turn am_t: sentence 1 of a second, then
// sentence 2 of 100 ms, the last.
type answering struct {
	r    *Room
	js   jetstream.JetStream
	wire *wire
}

const testTurn = "am_t"

// newAnswering is a room answering; opts change its configuration.
func newAnswering(t *testing.T, opts ...func(*Config)) *answering {
	t.Helper()
	ns := natstest.Run(t)
	nc := natstest.Connect(t, ns)
	js := natstest.JetStream(t, nc)
	ctx, cancel := context.WithCancel(context.Background())
	if err := bus.EnsureStreams(ctx, js, bus.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	cfg := Config{BargeInWordsWait: 300 * time.Millisecond}
	for _, o := range opts {
		o(&cfg)
	}
	cfg = cfg.WithDefaults()
	r := &Room{cfg: cfg, d: Deps{NC: nc, JS: js, Log: zerolog.Nop(), Metrics: DefaultMetrics()}, cid: protocol.NewID("ac"),
		log: zerolog.Nop(), pub: bus.NewPublisher(js), ctx: ctx, cancel: cancel}
	r.turns = newTracker(r, newTurnMetrics(r.d.Metrics, nil))
	p, err := NewPlayer(r.turns.onPlay)
	if err != nil {
		t.Fatal(err)
	}
	w := &wire{}
	p.enc = w
	r.player = p
	var wg sync.WaitGroup
	wg.Go(func() { p.Run(ctx) })
	wg.Go(func() { r.turns.publishLoop(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	// The question ended (its voice.end_of_speech span) and each sentence's
	// audio comes with the span that synthesised it (tts.sentence), as
	// room.go notes them from the SpeechAudio's meta.
	r.turns.speechEnded("am_q", time.Now(), testSpans.endOfSpeech)
	r.turns.startAnswer(&protocol.StartAnswer{ID: testTurn, PreviousID: "am_q", ConversationID: r.cid})
	for seq := int32(1); seq <= 2; seq++ {
		r.turns.sentence(&protocol.AssistantSentence{ID: protocol.Ptr(testTurn + "_s" + string(rune('0'+seq))), PreviousID: testTurn,
			Sequence: seq, IsFinal: protocol.Ptr(seq == 2), ConversationID: r.cid, Text: testSentences[seq-1]})
		r.turns.sentenceAudio(testTurn+"_s"+string(rune('0'+seq)), testSpans.sentence[seq])
	}
	for c := int32(0); c < 10; c++ {
		p.Add(chunk(testTurn, 1, c, c == 9, false))
	}
	p.Add(chunk(testTurn, 2, 0, true, true))
	testkit.Eventually(t, 2*time.Second, func() bool { return len(w.frames()) >= 5 }, "the answer did not play")
	return &answering{r: r, js: js, wire: w}
}

// stored is what the room published on the conversation's stream, in order.
func (a *answering) stored(t *testing.T) []protocol.Envelope {
	t.Helper()
	return natstest.Stored(t, a.js, bus.StreamConversations, subjects.Conversation(a.r.cid))
}

// waitFor returns what was stored once done says it is enough.
func (a *answering) waitFor(t *testing.T, what string, done func([]protocol.Envelope) bool) []protocol.Envelope {
	t.Helper()
	var got []protocol.Envelope
	testkit.Eventually(t, 5*time.Second, func() bool {
		got = a.stored(t)
		return done(got)
	}, what)
	return got
}

func has(typ protocol.MessageType) func([]protocol.Envelope) bool {
	return func(envs []protocol.Envelope) bool { return count(envs, typ) > 0 }
}

func recorded(n int) func([]protocol.Envelope) bool {
	return func(envs []protocol.Envelope) bool { return len(playouts(envs)) == n }
}

// playouts are the SentencePlayout statuses stored, by sentence sequence.
func playouts(envs []protocol.Envelope) map[int32]protocol.SentencePlayoutStatus {
	out := map[int32]protocol.SentencePlayoutStatus{}
	for _, e := range envs {
		if p, ok := e.Body.(*protocol.SentencePlayout); ok {
			out[p.Sequence] = p.Status
		}
	}
	return out
}

func count(envs []protocol.Envelope, typ protocol.MessageType) int {
	n := 0
	for _, e := range envs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// pausing: a barge-in pauses the answer instead of lowering it.
func pausing(c *Config) { c.DuckDB = -100 }

// A barge-in pauses; the first words stop the answer: ControlStop, the cut
// sentence interrupted (with what was heard of it), the rest unplayed.
func TestBargeInWithWordsStopsTheAnswer(t *testing.T) {
	a := newAnswering(t, pausing)
	a.r.turns.bargeIn("am_u", time.Now())
	paused := len(a.wire.frames())
	if envs := a.stored(t); len(envs) != 0 {
		t.Fatalf("published %d envelopes before the speech had words", len(envs))
	}
	a.r.turns.heard(&protocol.Transcription{ID: "am_u", ConversationID: a.r.cid, Text: "wait"})
	envs := a.waitFor(t, "playout not recorded", recorded(2))
	if count(envs, protocol.TypeControlStop) != 1 {
		t.Fatal("no ControlStop")
	}
	cs := envs[0].Body.(*protocol.ControlStop)
	if *cs.TargetID != testTurn || *cs.StopType != protocol.ControlStopStopTypeSpeech {
		t.Fatalf("ControlStop %+v", cs)
	}
	got := playouts(envs)
	if got[1] != protocol.SentencePlayoutStatusInterrupted || got[2] != protocol.SentencePlayoutStatusUnplayed {
		t.Fatalf("playout %v", got)
	}
	for _, e := range envs {
		if p, ok := e.Body.(*protocol.SentencePlayout); ok && p.Sequence == 1 && time.Duration(p.PlayedMs)*time.Millisecond != time.Duration(paused)*frameDur {
			t.Fatalf("interrupted after %d ms, %d frames went out", p.PlayedMs, paused)
		}
	}
	if n := count(envs, protocol.TypeTurnEvent); n != 0 {
		t.Fatalf("%d TurnEvents", n)
	}
	if n := len(a.wire.frames()); n != paused {
		t.Fatalf("%d frames written after the barge-in", n-paused)
	}
}

// No words: the answer resumes from the start of the cut sentence and is
// played to its end; one TurnEvent false_interruption, no ControlStop.
func TestFalseInterruptionResumesTheAnswer(t *testing.T) {
	for _, c := range []struct {
		name  string
		final *protocol.Transcription // nil: no transcript comes
	}{
		{"empty final transcript", &protocol.Transcription{ID: "am_u", Final: true}},
		{"no transcript within the wait", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := newAnswering(t, pausing)
			a.r.turns.bargeIn("am_u", time.Now())
			paused := len(a.wire.frames())
			a.r.turns.heard(&protocol.Transcription{ID: "am_u", Text: " "}) // a partial without words
			a.r.turns.speechEnded("am_u", time.Now(), trace.SpanContext{})
			if c.final != nil {
				a.r.turns.heard(c.final)
			}
			envs := a.waitFor(t, "no TurnEvent", has(protocol.TypeTurnEvent))
			ev := envs[0].Body.(*protocol.TurnEvent)
			if ev.Kind != protocol.TurnEventKindFalseInterruption || *ev.MessageID != testTurn || *ev.SentenceID != testTurn+"_s1" ||
				*ev.UtteranceID != "am_u" || *ev.Reason != "no_words" || len(userMeta(envs[0].Meta)) != 0 {
				t.Fatalf("TurnEvent %+v meta %v", ev, envs[0].Meta)
			}
			envs = a.waitFor(t, "the answer did not play to its end", recorded(2))
			if got := playouts(envs); got[1] != protocol.SentencePlayoutStatusPlayed || got[2] != protocol.SentencePlayoutStatusPlayed {
				t.Fatalf("playout %v", got)
			}
			if n := count(envs, protocol.TypeControlStop); n != 0 {
				t.Fatalf("%d ControlStops", n)
			}
			// Sentence 1 again whole (50 frames), then sentence 2 (5).
			if n := len(a.wire.frames()) - paused; n != 55 {
				t.Fatalf("%d frames after the pause, want 55", n)
			}
		})
	}
}

// While paused, more speech barges in: an empty transcript of the first
// does not resume while the second goes on, and the second's words stop
// the answer.
func TestSecondInterruptionKeepsThePause(t *testing.T) {
	a := newAnswering(t)
	a.r.turns.bargeIn("am_u1", time.Now())
	a.r.turns.bargeIn("am_u2", time.Now())
	a.r.turns.speechEnded("am_u1", time.Now(), trace.SpanContext{})
	a.r.turns.heard(&protocol.Transcription{ID: "am_u1", Final: true})
	a.r.turns.heard(&protocol.Transcription{ID: "am_u2", Text: "no wait"})
	envs := a.waitFor(t, "no ControlStop", has(protocol.TypeControlStop))
	// Records go out in order: a resumption would have come first.
	if n := count(envs, protocol.TypeTurnEvent); n != 0 {
		t.Fatalf("resumed while the second interruption went on (%d TurnEvents)", n)
	}
}

// ducked reports whether every frame in peaks is about a tenth (-20 dB) of
// full, and some frame was written.
func ducked(peaks []int, full int) bool {
	if len(peaks) == 0 {
		return false
	}
	for _, p := range peaks {
		if p > full/8 || p < full/12 {
			return false
		}
	}
	return true
}

// By default a barge-in lowers the answer (-20 dB) at once and it keeps
// playing; words stop it, and what was heard is what played, lowered
// frames included.
func TestBargeInDucksThenWordsStop(t *testing.T) {
	a := newAnswering(t)
	a.r.turns.bargeIn("am_u", time.Now())
	at := len(a.wire.frames())
	testkit.Eventually(t, 2*time.Second, func() bool { return len(a.wire.frames()) >= at+5 }, "the answer stopped playing while lowered")
	if f := a.wire.frames(); !ducked(f[at:], f[0]) || f[at-1] != f[0] {
		t.Fatalf("peaks around the barge-in %v (at %d): want full before, a tenth after", f[max(0, at-3):], at)
	}
	a.r.turns.heard(&protocol.Transcription{ID: "am_u", ConversationID: a.r.cid, Text: "wait, what about Sunday"})
	envs := a.waitFor(t, "playout not recorded", recorded(2))
	stoppedAt := len(a.wire.frames())
	if count(envs, protocol.TypeControlStop) != 1 {
		t.Fatal("no ControlStop")
	}
	for _, e := range envs {
		if p, ok := e.Body.(*protocol.SentencePlayout); ok && p.Sequence == 1 {
			if p.Status != protocol.SentencePlayoutStatusInterrupted || time.Duration(p.PlayedMs)*time.Millisecond != time.Duration(stoppedAt)*frameDur {
				t.Fatalf("sentence 1 %s after %d ms; %d frames went out", p.Status, p.PlayedMs, stoppedAt)
			}
		}
	}
	// The next answer plays at its level again.
	a.r.player.Add(chunk("am_next", 1, 0, true, true))
	testkit.Eventually(t, 2*time.Second, func() bool { return len(a.wire.frames()) > stoppedAt }, "the next answer")
	if f := a.wire.frames(); f[len(f)-1] != f[0] {
		t.Fatalf("the next answer plays at peak %d", f[len(f)-1])
	}
}

// "Mm-hmm" over the answer: it is lowered while the words are decided,
// then goes on at its level without replaying anything; a TurnEvent
// backchannel records what was said; no ControlStop; the final job is told
// (Backchannel true) so the utterance becomes no user message.
func TestBackchannelKeepsTheAnswer(t *testing.T) {
	for _, c := range []struct {
		name string
		// via the speculative transcript before the utterance ends, or
		// decided by the final job's transcript after it.
		spec bool
	}{{"speculative transcript", true}, {"final job", false}} {
		t.Run(c.name, func(t *testing.T) {
			a := newAnswering(t)
			a.r.turns.bargeIn("am_u", time.Now())
			at := len(a.wire.frames())
			// While it is decided, the answer plays on lowered.
			testkit.Eventually(t, 2*time.Second, func() bool { return len(a.wire.frames()) >= at+2 }, "the answer stopped playing while lowered")
			if f := a.wire.frames(); !ducked(f[at:at+2], f[0]) {
				t.Fatalf("peaks %v after the barge-in at %d: want lowered", f, at)
			}
			if c.spec {
				a.r.turns.heard(&protocol.Transcription{ID: "am_u", ConversationID: a.r.cid, Text: "Mm-hmm."})
			}
			a.r.turns.speechEnded("am_u", time.Now(), trace.SpanContext{})
			if a.r.turns.Overheard("am_u", "Mm-hmm.", true) != heardBackchannel {
				t.Fatal("the final job was not told it is a backchannel")
			}
			envs := a.waitFor(t, "no TurnEvent", has(protocol.TypeTurnEvent))
			ev := envs[0].Body.(*protocol.TurnEvent)
			if ev.Kind != protocol.TurnEventKindBackchannel || *ev.Transcript != "Mm-hmm." || *ev.MessageID != testTurn || *ev.UtteranceID != "am_u" || ev.HeldMs == nil {
				t.Fatalf("TurnEvent %+v", ev)
			}
			envs = a.waitFor(t, "the answer did not play to its end", recorded(2))
			if got := playouts(envs); got[1] != protocol.SentencePlayoutStatusPlayed || got[2] != protocol.SentencePlayoutStatusPlayed {
				t.Fatalf("playout %v", got)
			}
			if n := count(envs, protocol.TypeControlStop); n != 0 {
				t.Fatalf("%d ControlStops", n)
			}
			f := a.wire.frames()
			if len(f) != 55 {
				t.Fatalf("%d frames in all, want the answer's 55 (nothing replayed)", len(f))
			}
			if f[len(f)-1] != f[0] {
				t.Fatalf("peaks %v: want full at the end", f)
			}
		})
	}
}

// testSentences are the test answer's two sentences.
var testSentences = []string{"The weather in Paris is mild this week.", "Expect rain on Sunday afternoon."}

// The answer's own words, come back through the microphone, over it: it is
// lowered while they are decided, then goes on at its level; a TurnEvent
// false_interruption (reason echo) records what was heard; no ControlStop;
// the final job is told (Echo) so the utterance becomes no user message.
func TestEchoKeepsTheAnswer(t *testing.T) {
	for _, c := range []struct {
		name string
		spec bool // decided by the speculative transcript, else by the final job's
	}{{"speculative transcript", true}, {"final job", false}} {
		t.Run(c.name, func(t *testing.T) {
			a := newAnswering(t)
			a.r.turns.bargeIn("am_u", time.Now())
			heard := "in Paris is mild this"
			if c.spec {
				a.r.turns.heard(&protocol.Transcription{ID: "am_u", ConversationID: a.r.cid, Text: heard})
			}
			a.r.turns.speechEnded("am_u", time.Now(), trace.SpanContext{})
			if got := a.r.turns.Overheard("am_u", heard, true); got != heardEcho {
				t.Fatalf("the final job was told %v, want echo", got)
			}
			envs := a.waitFor(t, "no TurnEvent", has(protocol.TypeTurnEvent))
			ev := envs[0].Body.(*protocol.TurnEvent)
			if ev.Kind != protocol.TurnEventKindFalseInterruption || *ev.Reason != "echo" || *ev.Transcript != heard || *ev.MessageID != testTurn || ev.HeldMs == nil {
				t.Fatalf("TurnEvent %+v", ev)
			}
			envs = a.waitFor(t, "the answer did not play to its end", recorded(2))
			if got := playouts(envs); got[1] != protocol.SentencePlayoutStatusPlayed || got[2] != protocol.SentencePlayoutStatusPlayed {
				t.Fatalf("playout %v", got)
			}
			if n := count(envs, protocol.TypeControlStop); n != 0 {
				t.Fatalf("%d ControlStops", n)
			}
		})
	}
}

// Speech over the answer that quotes it among words of its own is an
// interruption; the answer's own words said by an utterance that never
// barged in (too short, or muted in part) are no user message either.
func TestEchoOrWords(t *testing.T) {
	a := newAnswering(t)
	if got := a.r.turns.Overheard("am_e", "rain on Sunday afternoon", false); got != heardEcho {
		t.Fatalf("the answer's words told %v, want echo", got)
	}
	if got := a.r.turns.Overheard("am_w", "no, what about Sunday afternoon then", false); got != notOverheard {
		t.Fatalf("a question quoting the answer told %v", got)
	}
	if got := a.r.turns.Overheard("am_b", "Mm-hmm.", false); got != notOverheard {
		t.Fatalf("a backchannel that never barged in told %v", got)
	}
	// One word: the answer's echo only when the utterance sounded like
	// what was played and the word is the answer's.
	if got := a.r.turns.Overheard("am_p", "Paris.", false); got != notOverheard {
		t.Fatalf("a person's own one-word answer told %v", got)
	}
	a.r.turns.noteEchoLike("am_l")
	a.r.turns.noteEchoLike("am_s")
	if got := a.r.turns.Overheard("am_l", "Paris.", false); got != heardEcho {
		t.Fatalf("one word of the answer in sound like the answer told %v, want echo", got)
	}
	if got := a.r.turns.Overheard("am_s", "Stop!", false); got != notOverheard {
		t.Fatalf("a word not in the answer told %v", got)
	}
	a.r.turns.bargeIn("am_u", time.Now())
	a.r.turns.heard(&protocol.Transcription{ID: "am_u", ConversationID: a.r.cid, Text: "weather in Paris"})
	a.r.turns.heard(&protocol.Transcription{ID: "am_u", ConversationID: a.r.cid, Text: "weather in Paris? No, tell me about London"})
	envs := a.waitFor(t, "no ControlStop", has(protocol.TypeControlStop))
	if n := count(envs, protocol.TypeTurnEvent); n != 0 {
		t.Fatalf("%d TurnEvents", n)
	}
}

func TestIsEcho(t *testing.T) {
	answer := words(strings.Join(testSentences, " "))
	for _, c := range []struct {
		heard string
		want  bool
	}{
		{"The weather in Paris is mild this week.", true},
		{"weather in Paris", true},
		{"ther in Paris is mild", true},          // begins mid-word
		{"Paris is mild this week expect", true}, // across sentences
		{"Paris, is mild.", true},
		{"in Paris", true},
		{"Paris", false}, // one word proves nothing
		{"Sunday", false},
		{"What about Sunday afternoon then?", false},
		{"No, the weather in Paris tomorrow please", false},
		{"Paris mild", false}, // not in the answer's order
		{"", false},
	} {
		if got := isEcho(words(c.heard), answer); got != c.want {
			t.Errorf("isEcho(%q) = %v, want %v", c.heard, got, c.want)
		}
	}
}

// "Okay" then more words: the answer stops.
func TestBackchannelThenWordsStop(t *testing.T) {
	a := newAnswering(t)
	a.r.turns.bargeIn("am_u", time.Now())
	a.r.turns.heard(&protocol.Transcription{ID: "am_u", ConversationID: a.r.cid, Text: "Okay"})
	a.r.turns.heard(&protocol.Transcription{ID: "am_u", ConversationID: a.r.cid, Text: "Okay, stop there"})
	envs := a.waitFor(t, "no ControlStop", has(protocol.TypeControlStop))
	if n := count(envs, protocol.TypeTurnEvent); n != 0 {
		t.Fatalf("%d TurnEvents", n)
	}
	if a.r.turns.Overheard("am_u", "Okay, stop there", true) != notOverheard {
		t.Fatal("a real interruption called a backchannel")
	}
}

func TestBackchannels(t *testing.T) {
	b := DefaultBackchannels()
	for _, c := range []struct {
		text, lang string
		want       bool
	}{
		{"Mm-hmm.", "en", true}, {"mm hmm", "", true}, {"Yeah, yeah.", "en", true}, {"Uh-huh", "en", true},
		{"Okay.", "", true}, {"Right, I see.", "en", true}, {"Oui, d'accord.", "fr", true}, {"Ja, genau.", "de", true},
		{"Okay, stop there.", "en", false}, {"What about tomorrow?", "en", false}, {"", "en", false},
		{"yeah yeah yeah yeah yeah yeah yeah", "en", false}, // too long to be one
		{"Oui", "en", false}, // English only when the language is known
	} {
		if got := b.Is(c.text, c.lang); got != c.want {
			t.Errorf("Is(%q, %q) = %v, want %v", c.text, c.lang, got, c.want)
		}
	}
	custom, err := ParseBackchannels("en=roger|copy that; nl=ja|precies")
	if err != nil {
		t.Fatal(err)
	}
	if !custom.Is("Roger.", "en") || custom.Is("Yeah", "en") || !custom.Is("Precies!", "nl") || !custom.Is("Oui", "fr") {
		t.Fatalf("custom lists %v", custom)
	}
	for _, bad := range []string{"english=yeah", "en", "en=a b c d e f g"} {
		if _, err := ParseBackchannels(bad); err == nil {
			t.Errorf("ParseBackchannels(%q) took it", bad)
		}
	}
}
