package voice_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/voiceclient"
)

// A timer set by voice in a call is spoken in that call when it fires: the
// person asks aloud, the model calls set_timer (the llm's real tool), and
// three seconds later the timer's message (meta alicia.timer_id) comes as a
// text+voice answer whose sentence the room-agent plays to the person; the
// timer is stored fired and delivered as spoken.
func TestTimerSpokenInCall(t *testing.T) {
	const ask = "Set a tea timer for three seconds"
	s := newStack(t, options{respond: func(r fakeopenai.Request) fakeopenai.Turn {
		switch {
		case fakeopenai.HasToolResult()(r):
			return fakeopenai.Text("Your tea timer is set.")
		case r.LastUser() == ask:
			return fakeopenai.Calls(fakeopenai.ToolCall{Name: "set_timer", Arguments: `{"duration":"PT3S","label":"tea"}`})
		}
		return fakeopenai.Text("Hello.")
	}})
	s.speech.SetTranscriber(func(fakeopenai.TranscriptionRequest) fakeopenai.Transcript { return fakeopenai.Transcript{Text: ask} })
	cid := s.conversation()
	u := voiceclient.Join(t, s.lk.URL, s.token(cid), true)
	u.Configure(voiceConfig(cid), cid)
	u.Say(voiceclient.Speech(t, ask))

	timerMsg := func(e protocol.Envelope) bool {
		_, ok := e.Body.(*protocol.StartAnswer)
		return ok && e.Meta["alicia.timer_id"] != nil
	}
	start := u.WaitFor(30*time.Second, "no timer message in the call", timerMsg)
	sa := start.Body.(*protocol.StartAnswer)
	if sa.AnswerType == nil || *sa.AnswerType != protocol.StartAnswerAnswerTypeTextVoice {
		t.Fatalf("timer message %+v: want text+voice in an open call", sa)
	}
	sent := u.WaitFor(20*time.Second, "no timer sentence", func(e protocol.Envelope) bool {
		b, ok := e.Body.(*protocol.AssistantSentence)
		return ok && b.PreviousID == sa.ID
	}).Body.(*protocol.AssistantSentence)
	if sent.Text != "Your 3-second timer for tea is done." {
		t.Fatalf("timer sentence %q", sent.Text)
	}
	// The room-agent played it to the person.
	u.WaitFor(20*time.Second, "the timer's sentence not played in the call", func(e protocol.Envelope) bool {
		p, ok := e.Body.(*protocol.SentencePlayout)
		return ok && p.MessageID == sa.ID && p.Status == protocol.SentencePlayoutStatusPlayed
	})
	id, _ := start.Meta["alicia.timer_id"].(string)
	testkit.Eventually(t, 10*time.Second, func() bool {
		var status, as, msg string
		err := s.pool.QueryRow(context.Background(), `SELECT status, COALESCE(delivered_as, ''), COALESCE(message_id, '') FROM alicia_timers WHERE id = $1`, id).
			Scan(&status, &as, &msg)
		return err == nil && status == "fired" && as == "spoken" && msg == sa.ID
	}, "timer %s stored fired, spoken", id)
}
