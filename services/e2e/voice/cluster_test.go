package voice_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/voiceclient"
)

// TestVoiceTurnsSurviveALeaderLoss: the voice stack runs on three
// JetStream servers with every stream at R3. While an answer to a spoken
// question streams (and is spoken), the server leading CONVERSATIONS shuts
// down. The answer in flight ends (its final sentence or an ErrorMessage)
// within 10 s of the loss instead of hanging; the services reconnect by
// themselves, and a question spoken after the loss is transcribed,
// answered and heard, every sentence of its answer played; each spoken
// question is one user message in Postgres.
func TestVoiceTurnsSurviveALeaderLoss(t *testing.T) {
	// Five sentences at 15 tokens a second: the answer streams for seconds.
	answer := "The sky is clear this morning. A light wind comes from the west. " +
		"Clouds may gather after noon. The evening should stay dry. Tomorrow looks much the same."
	s := newStack(t, options{cluster: true, answer: answer,
		profile: fakeopenai.Profile{Chat: fakeopenai.ChatTiming{TimeToFirstToken: 50 * time.Millisecond, TokensPerSecond: 15}}})
	for _, name := range bus.StreamNames() {
		st, err := s.js.Stream(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		if r := st.CachedInfo().Config.Replicas; r != 3 {
			t.Fatalf("stream %s has %d replicas, want 3", name, r)
		}
	}
	s.speech.SetTranscriber(func(fakeopenai.TranscriptionRequest) fakeopenai.Transcript {
		return fakeopenai.Transcript{Text: "What is the weather like in Paris tomorrow?"}
	})
	cid := s.conversation()
	u := voiceclient.Join(t, s.lk.URL, s.token(cid), true)
	u.Configure(voiceConfig(cid), cid)
	speech := voiceclient.Speech(t, "What is the weather like in Paris tomorrow?")

	u.Say(speech)
	first := u.WaitFor(30*time.Second, "no StartAnswer to the first question", isType(protocol.TypeStartAnswer)).Body.(*protocol.StartAnswer)
	u.WaitFor(20*time.Second, "no first sentence", func(e protocol.Envelope) bool {
		b, ok := e.Body.(*protocol.AssistantSentence)
		return ok && b.PreviousID == first.ID
	})

	victim := s.leaderOf(bus.StreamConversations)
	killed := time.Now()
	victim.Shutdown()
	victim.WaitForShutdown()
	t.Logf("shut down %s, the CONVERSATIONS leader, while answer %s streamed", victim.Name(), first.ID)

	// The answer in flight ends, one way or the other, and soon.
	ended := func(e protocol.Envelope) bool {
		switch b := e.Body.(type) {
		case *protocol.AssistantSentence:
			return b.PreviousID == first.ID && b.IsFinal != nil && *b.IsFinal
		case *protocol.ErrorMessage:
			return true
		}
		return false
	}
	end := u.WaitFor(30*time.Second, "the answer in flight neither completed nor failed", ended)
	endedAt := firstAt(u, ended)
	t.Logf("the answer in flight ended with %s %s after the loss", end.Type, endedAt.Sub(killed).Round(time.Millisecond))
	if d := endedAt.Sub(killed); d > 10*time.Second {
		t.Errorf("the answer in flight ended %s after the loss, want within 10 s", d.Round(time.Millisecond))
	}

	// A question spoken after the loss: transcribed, answered, heard.
	// The agent's speech of the first answer has ended, so the next
	// question is not a barge-in on it: half a second without its voice.
	u.WaitSent()
	testkit.Eventually(t, 30*time.Second, func() bool {
		n, _, _ := voiceclient.Loud(u.Heard(), time.Now().Add(-500*time.Millisecond))
		return n == 0 && time.Since(endedAt) > 500*time.Millisecond
	}, "the agent's speech of the first answer ended")
	saidAt := time.Now()
	u.Say(speech)
	second := u.WaitFor(60*time.Second, "no StartAnswer to the question spoken after the loss", func(e protocol.Envelope) bool {
		b, ok := e.Body.(*protocol.StartAnswer)
		return ok && b.ID != first.ID
	}).Body.(*protocol.StartAnswer)
	u.WaitFor(30*time.Second, "no final sentence of the answer after the loss", func(e protocol.Envelope) bool {
		b, ok := e.Body.(*protocol.AssistantSentence)
		return ok && b.PreviousID == second.ID && b.IsFinal != nil && *b.IsFinal
	})
	testkit.Eventually(t, 30*time.Second, func() bool {
		n, _, _ := voiceclient.Loud(u.Heard(), saidAt)
		return n >= 50 // a second of the agent's voice
	}, "no agent speech heard after the loss")
	t.Logf("question spoken %s after the loss: answer %s started %s after it was spoken",
		saidAt.Sub(killed).Round(time.Millisecond), second.ID, firstAt(u, func(e protocol.Envelope) bool {
			b, ok := e.Body.(*protocol.StartAnswer)
			return ok && b.ID == second.ID
		}).Sub(saidAt).Round(time.Millisecond))

	ctx := context.Background()
	testkit.EventuallyNoError(t, 30*time.Second, func() error {
		var users, played, sentences int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM alicia_messages WHERE conversation_id = $1 AND message_role = 'user'`, cid).Scan(&users); err != nil {
			return err
		}
		if err := s.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE playout_status = 'played') FROM alicia_sentences WHERE message_id = $1`,
			second.ID).Scan(&sentences, &played); err != nil {
			return err
		}
		if users != 2 || sentences != 5 || played != 5 {
			return errorf("%d user messages (want 2); the answer after the loss: %d sentences, %d played (want 5, 5)", users, sentences, played)
		}
		// The answer in flight, when it completed, lost no sentence.
		var before int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM alicia_sentences WHERE message_id = $1`, first.ID).Scan(&before); err != nil {
			return err
		}
		if end.Type == protocol.TypeAssistantSentence && before != 5 {
			return errorf("the answer in flight completed with %d sentences stored, want 5", before)
		}
		return nil
	}, "rows after the loss")
}

// leaderOf is the server leading stream name.
func (s *stack) leaderOf(name string) *server.Server {
	s.t.Helper()
	var leader *server.Server
	testkit.EventuallyNoError(s.t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, err := s.js.Stream(ctx, name)
		if err != nil {
			return err
		}
		info := st.CachedInfo()
		if info.Cluster == nil {
			return errorf("%s: no cluster info", name)
		}
		for _, srv := range s.cluster {
			if srv.Name() == info.Cluster.Leader {
				leader = srv
				return nil
			}
		}
		return errorf("%s led by %q, none of the servers", name, info.Cluster.Leader)
	}, "the leader of %s", name)
	return leader
}

// firstAt is when the first envelope that matches arrived.
func firstAt(u *voiceclient.User, match func(protocol.Envelope) bool) time.Time {
	envs, at := u.Received(), u.ReceivedAt()
	for i, e := range envs {
		if match(e) {
			return at[i]
		}
	}
	return time.Time{}
}
