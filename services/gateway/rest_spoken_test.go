package gateway_test

import (
	"net/http"
	"testing"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// TestSpokenAnswer: a voice answer cut off by the user reads back with what
// was heard as its content and every sentence with its playout, so the web
// client shows what was heard and, set apart, what was never played; a
// text answer has no spoken part.
func TestSpokenAnswer(t *testing.T) {
	s := newStack(t)
	var c conversation
	s.call(t, aliceKey, "POST", "/v1/conversations", nil).want(http.StatusCreated, &c)
	text := s.turn(t, "alice", c.ID, "am_typed", "", "typed")
	const ans = "am_voice_ans"
	sentence := func(seq int32, id, txt string, final bool) protocol.Envelope {
		return protocol.New(c.ID, &protocol.AssistantSentence{ID: protocol.Ptr(id), PreviousID: ans, ConversationID: c.ID, Sequence: seq,
			Text: txt, IsFinal: protocol.Ptr(final)})
	}
	playout := func(seq int32, id string, st protocol.SentencePlayoutStatus, ms int32) protocol.Envelope {
		return protocol.New(c.ID, &protocol.SentencePlayout{ConversationID: c.ID, MessageID: ans, SentenceID: id, Sequence: seq,
			Status: st, PlayedMs: ms})
	}
	s.publish(t, "alice",
		protocol.New(c.ID, &protocol.UserMessage{ID: "am_spoken", PreviousID: &text, ConversationID: c.ID, Content: "tell me a story"}),
		protocol.New(c.ID, &protocol.StartAnswer{ID: ans, PreviousID: "am_spoken", ConversationID: c.ID}),
		sentence(1, "ams_v1", "Once upon a time.", false),
		sentence(2, "ams_v2", "There was a fox.", false),
		sentence(3, "ams_v3", "The end.", true),
		playout(1, "ams_v1", protocol.SentencePlayoutStatusPlayed, 1200),
		playout(2, "ams_v2", protocol.SentencePlayoutStatusInterrupted, 400),
		playout(3, "ams_v3", protocol.SentencePlayoutStatusUnplayed, 0),
	)
	var got struct {
		Messages []struct {
			ID      string `json:"id"`
			Content string `json:"content"`
			Spoken  []struct {
				Sequence int32  `json:"sequence"`
				Text     string `json:"text"`
				Playout  string `json:"playout"`
				PlayedMs int32  `json:"playedMs"`
			} `json:"spoken"`
		} `json:"messages"`
	}
	s.call(t, aliceKey, "GET", "/v1/conversations/"+c.ID, nil).want(http.StatusOK, &got)
	if len(got.Messages) != 4 {
		t.Fatalf("%d messages, want 4", len(got.Messages))
	}
	if typed := got.Messages[1]; typed.ID != text || typed.Spoken != nil {
		t.Fatalf("text answer %+v has a spoken part", typed)
	}
	voice := got.Messages[3]
	if voice.ID != ans || voice.Content != "Once upon a time. There was a fox." {
		t.Fatalf("voice answer %+v: want the heard sentences as its content", voice)
	}
	want := []struct {
		text, playout string
		ms            int32
	}{{"Once upon a time.", "played", 1200}, {"There was a fox.", "interrupted", 400}, {"The end.", "unplayed", 0}}
	if len(voice.Spoken) != len(want) {
		t.Fatalf("spoken %+v", voice.Spoken)
	}
	for i, w := range want {
		sp := voice.Spoken[i]
		if sp.Sequence != int32(i+1) || sp.Text != w.text || sp.Playout != w.playout || sp.PlayedMs != w.ms {
			t.Fatalf("spoken[%d] = %+v, want %+v", i, sp, w)
		}
	}
}
