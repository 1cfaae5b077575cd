package voice_test

import (
	"context"
	"testing"
	"time"

	lksdk "github.com/livekit/server-sdk-go/v2"
	lkmedia "github.com/livekit/server-sdk-go/v2/pkg/media"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/otlptest"
	"github.com/alicia-voice/alicia/pkg/testkit/voiceclient"
	roomagent "github.com/alicia-voice/alicia/services/room-agent"
)

// histogram returns count and sum of a histogram on the default registry.
func histogram(t testing.TB, name string) (uint64, float64) {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			var n uint64
			var sum float64
			for _, m := range mf.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
				sum += m.GetHistogram().GetSampleSum()
			}
			return n, sum
		}
	}
	return 0, 0
}

func TestBargeIn(t *testing.T) {
	const bargeMin = 200 * time.Millisecond
	long := "The forecast for Paris tomorrow is mostly sunny with a few clouds in the afternoon. " +
		"Temperatures will climb to about twenty degrees by three in the afternoon. " +
		"In the evening a light breeze will come from the west and the sky stays clear. " +
		"On the weekend the weather should stay just as pleasant for a walk along the river."
	recv := otlptest.Setup(t)
	s := newStack(t, options{answer: long, agent: func(c *roomagent.Config) { c.BargeInMin = bargeMin }})
	s.speech.SetTranscriber(fakeopenai.NoWordsInNoise(nil)) // speech has words: it is no false interruption
	cid := s.conversation()
	u := voiceclient.Join(t, s.lk.URL, s.token(cid), true)
	u.Configure(voiceConfig(cid), cid)

	u.Say(voiceclient.Speech(t, "Tell me about the weather in Paris."))
	sa := u.WaitFor(20*time.Second, "no StartAnswer", isType(protocol.TypeStartAnswer)).Body.(*protocol.StartAnswer)
	var agentStarted time.Time
	testkit.Eventually(t, 20*time.Second, func() bool {
		n, first, _ := voiceclient.Loud(u.Heard(), time.Time{})
		agentStarted = first
		return n >= 25 // half a second of the agent's voice
	}, "the agent never spoke")
	_ = agentStarted

	stopsBefore, _ := histogram(t, "alicia_voice_barge_in_stop_seconds")
	confirmsBefore, _ := histogram(t, "alicia_voice_barge_in_confirm_seconds")
	interrupt := time.Now()
	u.Say(voiceclient.Speech(t, "Wait, stop, that is enough."))

	// Playout stops: no agent voice later than the barge-in decision (speech
	// onset + bargeMin) plus 100 ms and the audio already in flight.
	var decided time.Time // when the agent had decided, seen from here
	testkit.Eventually(t, 10*time.Second, func() bool {
		n, _ := histogram(t, "alicia_voice_barge_in_stop_seconds")
		decided = time.Now()
		return n > stopsBefore
	}, "no barge-in")
	n, sum := histogram(t, "alicia_voice_barge_in_stop_seconds")
	if avg := sum / float64(n); avg > 0.1 {
		t.Fatalf("barge-in to audio stopped: %.1f ms", avg*1000)
	}
	// The interruption is itself a turn: once its answer has started, nothing
	// of the old one is still in flight. Between the barge-in (the agent's
	// decision, plus the audio already on its way: 250 ms) and that answer,
	// silence. (Not a bound on how fast the decision comes: on a loaded
	// machine it comes late; BenchmarkBargeIn measures it.)
	var confirmed time.Time // when the agent had confirmed it (words), seen from here: an upper bound
	testkit.Eventually(t, 10*time.Second, func() bool {
		n, _ := histogram(t, "alicia_voice_barge_in_confirm_seconds")
		confirmed = time.Now()
		return n > confirmsBefore
	}, "the barge-in was not confirmed")
	var next time.Time
	testkit.Eventually(t, 30*time.Second, func() bool {
		envs, at := u.Received(), u.ReceivedAt() // at covers envs: both only grow
		for i, e := range envs {
			if b, ok := e.Body.(*protocol.StartAnswer); ok && b.ID != sa.ID {
				next = at[i]
				return true
			}
		}
		return false
	}, "the interruption was not answered")
	// From the decision (plus the audio in flight) the answer is lowered
	// (ALICIA_BARGE_IN_DUCK_DB, -20 dB) while the words are decided; from
	// the confirmation (its words) it is silent until the next answer.
	full := -120.0
	for _, h := range u.Heard() {
		if h.At.Before(interrupt) {
			full = max(full, audio.DBFS(h.PCM))
		}
	}
	limit := decided.Add(250 * time.Millisecond)
	for _, h := range u.Heard() {
		if !h.At.After(limit) || !h.At.Before(next) {
			continue
		}
		if level := audio.DBFS(h.PCM); h.At.After(confirmed.Add(250*time.Millisecond)) && level >= -45 {
			t.Fatalf("agent still heard %v after the user started speaking, after the confirmation (next answer at %v)", h.At.Sub(interrupt), next.Sub(interrupt))
		} else if level > full-15 {
			t.Fatalf("agent heard at %.1f dBFS %v after the user started speaking (the answer peaked at %.1f): not lowered", level, h.At.Sub(interrupt), full)
		}
	}

	// ControlStop (speech) is in the stream, and the unplayed sentences are marked.
	ctx := context.Background()
	st, err := s.js.Stream(ctx, "CONVERSATIONS")
	if err != nil {
		t.Fatal(err)
	}
	var stop protocol.Envelope
	testkit.EventuallyNoError(t, 10*time.Second, func() error {
		m, err := st.GetLastMsgForSubject(ctx, subjects.Client(cid, protocol.TypeControlStop))
		if err != nil {
			return err
		}
		env, err := protocol.Decode(m.Data)
		if err != nil {
			return err
		}
		cs := env.Body.(*protocol.ControlStop)
		if cs.StopType == nil || *cs.StopType != protocol.ControlStopStopTypeSpeech || cs.TargetID == nil || *cs.TargetID != sa.ID {
			return errorf("ControlStop %+v", cs)
		}
		stop = env
		return nil
	}, "no ControlStop")
	bargeInTrace(t, recv, sa.ID, stop)
	testkit.EventuallyNoError(t, 20*time.Second, func() error {
		var unplayed, heardN int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE playout_status = 'unplayed'),
				count(*) FILTER (WHERE playout_status IN ('played', 'interrupted'))
			FROM alicia_sentences WHERE message_id = $1`, sa.ID).Scan(&unplayed, &heardN); err != nil {
			return err
		}
		if unplayed < 1 || heardN < 1 {
			return errorf("unplayed %d, heard %d", unplayed, heardN)
		}
		return nil
	}, "playout not recorded")
	if evs := falseInterruptions(t, s, cid); len(evs) != 0 {
		t.Fatalf("a barge-in with words taken for a false interruption: %+v", evs[0])
	}
}

func TestDataOnlyClient(t *testing.T) {
	s := newStack(t, options{answer: "Hello from the room. How can I help?"})
	cid := s.conversation()
	u := voiceclient.Join(t, s.lk.URL, s.token(cid), false)
	u.Configure(&protocol.Configuration{ConversationID: &cid, Features: []protocol.ConfigurationFeaturesElem{protocol.ConfigurationFeaturesElemStreaming}}, cid)
	u.Send(&protocol.UserMessage{ID: protocol.NewID("am"), ConversationID: cid, Content: "Hi there"}, cid)
	u.WaitFor(20*time.Second, "no final sentence", func(e protocol.Envelope) bool {
		b, ok := e.Body.(*protocol.AssistantSentence)
		return ok && b.IsFinal != nil && *b.IsFinal
	})
	// Malformed input gets an error on the data channel and the session lives on.
	u.Send(&protocol.SpeechAudio{ConversationID: cid, MessageID: "x", SentenceID: "y", Sequence: 1, Format: "pcm_s16le_24000", Last: true}, cid)
	u.WaitFor(10*time.Second, "internal type not refused", func(e protocol.Envelope) bool {
		m, ok := e.Body.(*protocol.ErrorMessage)
		return ok && m.Code == protocol.CodeUnknownType
	})
	if n := s.speech.SpeechCount(); n != 0 {
		t.Fatalf("a text-only client's answer was synthesised %d times", n)
	}
}

// TestTokenAllowsTheMicrophoneOnly: with the gateway's room token a user
// publishes a microphone, and livekit-server refuses any other source (a
// screen share's audio here): each track would cost the agent a listener
// and ASR jobs.
func TestTokenAllowsTheMicrophoneOnly(t *testing.T) {
	s := newStack(t, options{answer: "Hello."})
	cid := s.conversation()
	u := voiceclient.Join(t, s.lk.URL, s.token(cid), true)
	extra, err := lkmedia.NewPCMLocalTrack(16000, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	if _, err := u.Room.LocalParticipant.PublishTrack(extra, &lksdk.TrackPublicationOptions{Name: "screen-audio", Source: 4}); err == nil {
		t.Fatal("published a screen share's audio with the gateway's token")
	}
	if n := len(u.Room.LocalParticipant.TrackPublications()); n != 1 {
		t.Fatalf("%d tracks published, want the microphone only", n)
	}
}

// TestRejoinGetsEachFrameOnce: a user leaves the room and joins again with
// the same identity (a reloaded page). LiveKit gives the new connection a new
// participant sid and need not report the old one gone: the agent ends the
// first visit's session and opens a new one, so the new Configuration is
// answered (it was refused as "already configured") and every server
// envelope of the next turn arrives once, not once per visit.
func TestRejoinGetsEachFrameOnce(t *testing.T) {
	s := newStack(t, options{answer: "Hello again. Nice to see you back."})
	cid := s.conversation()
	streaming := []protocol.ConfigurationFeaturesElem{protocol.ConfigurationFeaturesElemStreaming}
	u := voiceclient.Join(t, s.lk.URL, s.token(cid), false)
	u.Configure(&protocol.Configuration{ConversationID: &cid, Features: streaming}, cid)
	u.Room.Disconnect()

	again := voiceclient.Join(t, s.lk.URL, s.token(cid), false)
	again.ContinueStanzas(u) // the client's stanza ids go on across visits
	again.Configure(&protocol.Configuration{ConversationID: &cid, Features: streaming}, cid)
	again.Send(&protocol.UserMessage{ID: protocol.NewID("am"), ConversationID: cid, Content: "I'm back"}, cid)
	again.WaitFor(20*time.Second, "no final sentence", func(e protocol.Envelope) bool {
		b, ok := e.Body.(*protocol.AssistantSentence)
		return ok && b.IsFinal != nil && *b.IsFinal
	})
	// A second session would forward the same frames within milliseconds.
	<-time.After(time.Second)
	seen := map[int32]int{}
	for _, e := range again.Received() {
		if e.StanzaID < 0 {
			seen[e.StanzaID]++
		}
	}
	for id, n := range seen {
		if n > 1 {
			t.Fatalf("server envelope %d arrived %d times after a rejoin", id, n)
		}
	}
}
