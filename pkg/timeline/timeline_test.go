package timeline_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/timeline"
)

const cid = "ac_t"

func encode(t *testing.T, env protocol.Envelope) []byte {
	t.Helper()
	b, err := protocol.Encode(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLinkFields(t *testing.T) {
	yes, no := true, false
	audio := bytes.Repeat([]byte{0x7f}, 64<<10)
	cases := []struct {
		name    string
		origin  subjects.Origin
		env     protocol.Envelope
		want    timeline.Step // link fields only
		summary string
	}{
		{"partial transcription", subjects.OriginServer, protocol.New(cid, &protocol.Transcription{ID: "am_u", ConversationID: cid, Text: "what ti"}),
			timeline.Step{MessageID: "am_u", Final: &no}, `partial "what ti"`},
		{"final transcription", subjects.OriginServer, protocol.New(cid, &protocol.Transcription{ID: "am_u", ConversationID: cid, Text: "what time", Final: true}),
			timeline.Step{MessageID: "am_u", Final: &yes}, `final "what time"`},
		{"user message", subjects.OriginClient, protocol.Envelope{StanzaID: 3, ConversationID: cid, Type: protocol.TypeUserMessage,
			Body: &protocol.UserMessage{ID: "am_u", ConversationID: cid, Content: "what time"}},
			timeline.Step{MessageID: "am_u"}, `"what time"`},
		{"input audio of an utterance", subjects.OriginClient, protocol.Envelope{StanzaID: 2, ConversationID: cid, Type: protocol.TypeAudioChunk,
			Meta: map[string]any{edge.MetaUtteranceID: "am_u", "alicia.user_id": "alice"},
			Body: &protocol.AudioChunk{ConversationID: cid, Format: "pcm_s16le_16000", Sequence: 1, DurationMs: 2000, Data: audio}},
			timeline.Step{MessageID: "am_u"}, "pcm_s16le_16000 #1 2000 ms"},
		{"audio without an utterance", subjects.OriginClient, protocol.Envelope{StanzaID: 2, ConversationID: cid, Type: protocol.TypeAudioChunk,
			Body: &protocol.AudioChunk{ConversationID: cid, Format: "opus", Sequence: 4, DurationMs: 20, Data: audio[:10]}},
			timeline.Step{}, "opus #4 20 ms"},
		{"start of an answer", subjects.OriginServer, protocol.New(cid, &protocol.StartAnswer{ID: "am_a", PreviousID: "am_u", ConversationID: cid}),
			timeline.Step{MessageID: "am_a", ReplyTo: "am_u"}, "answer am_a to am_u"},
		{"whole answer", subjects.OriginServer, protocol.New(cid, &protocol.AssistantMessage{ID: "am_a", PreviousID: protocol.Ptr("am_u"), ConversationID: cid, Content: "Noon."}),
			timeline.Step{MessageID: "am_a", ReplyTo: "am_u"}, `"Noon."`},
		{"sentence", subjects.OriginServer, protocol.New(cid, &protocol.AssistantSentence{PreviousID: "am_a", ConversationID: cid, Sequence: 2, Text: "It is noon."}),
			timeline.Step{MessageID: "am_a", Sentence: 2}, `#2 "It is noon."`},
		{"final sentence with audio", subjects.OriginServer, protocol.New(cid, &protocol.AssistantSentence{PreviousID: "am_a", ConversationID: cid, Sequence: 3, Text: "Bye.", IsFinal: &yes, Audio: audio}),
			timeline.Step{MessageID: "am_a", Sentence: 3, Final: &yes}, `#3 "Bye." (final)`},
		{"sentence audio", subjects.OriginAgent, protocol.New(cid, &protocol.SentenceAudio{ConversationID: cid, MessageID: "am_a", SentenceID: "as_1", Sequence: 1,
			Format: "pcm_s16le_24000", DurationMs: 900, ByteSize: 43200, Data: audio}),
			timeline.Step{MessageID: "am_a", Sentence: 1}, "am_a #1 pcm_s16le_24000 900 ms, 43200 bytes"},
		{"playout", subjects.OriginAgent, protocol.New(cid, &protocol.SentencePlayout{ConversationID: cid, MessageID: "am_a", SentenceID: "as_1", Sequence: 1,
			Status: protocol.SentencePlayoutStatusInterrupted, PlayedMs: 420}),
			timeline.Step{MessageID: "am_a", Sentence: 1, Status: "interrupted"}, "am_a #1 interrupted after 420 ms"},
		{"preempt cancelled", subjects.OriginAgent, protocol.New(cid, &protocol.TurnEvent{ConversationID: cid, Kind: protocol.TurnEventKindPreemptCancelled,
			UtteranceID: protocol.Ptr("am_u"), Transcript: protocol.Ptr("What is the"), Reason: protocol.Ptr("speech_resumed"), HeldMs: protocol.Ptr(int32(240))}),
			timeline.Step{MessageID: "am_u"}, `preempt_cancelled of am_u "What is the" (speech_resumed) after 240 ms`},
		{"false interruption", subjects.OriginAgent, protocol.New(cid, &protocol.TurnEvent{ConversationID: cid, Kind: protocol.TurnEventKindFalseInterruption,
			UtteranceID: protocol.Ptr("am_u"), MessageID: protocol.Ptr("am_a"), SentenceID: protocol.Ptr("as_2"), Reason: protocol.Ptr("no_words"), HeldMs: protocol.Ptr(int32(800))}),
			timeline.Step{MessageID: "am_a"}, `false_interruption by am_u: am_a resumed from as_2 (no_words) after 800 ms`},
		{"tool request", subjects.OriginServer, protocol.New(cid, &protocol.ToolUseRequest{ID: "atu_1", MessageID: "am_a", ConversationID: cid, ToolName: "clock",
			Parameters: map[string]any{"tz": "UTC"}, Execution: protocol.ToolUseRequestExecutionServer}),
			timeline.Step{MessageID: "am_a"}, `clock({"tz":"UTC"})`},
		// A result names its request only.
		{"tool result", subjects.OriginServer, protocol.New(cid, &protocol.ToolUseResult{ID: "atr_1", RequestID: "atu_1", ConversationID: cid, Success: true, Result: "12:00"}),
			timeline.Step{}, `atu_1 → "12:00"`},
		{"reasoning", subjects.OriginServer, protocol.New(cid, &protocol.ReasoningStep{ID: "ar_1", MessageID: "am_a", ConversationID: cid, Sequence: 1, Content: "look at the clock"}),
			timeline.Step{MessageID: "am_a"}, `#1 "look at the clock"`},
		{"memory", subjects.OriginServer, protocol.New(cid, &protocol.MemoryTrace{ID: "amt_1", MessageID: "am_a", MemoryID: "amem_1", ConversationID: cid, Content: "lives in Lisbon", Relevance: 0.8}),
			timeline.Step{MessageID: "am_a"}, `amem_1 (0.80) "lives in Lisbon"`},
		{"stop", subjects.OriginClient, protocol.Envelope{StanzaID: 5, ConversationID: cid, Type: protocol.TypeControlStop,
			Body: &protocol.ControlStop{ConversationID: cid, TargetID: protocol.Ptr("am_a")}},
			timeline.Step{}, "stop am_a "},
	}
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tl timeline.Timeline
			seq := uint64(100 + i)
			st := tl.Step(seq, subjectOf(c.origin, c.env.Type), at, encode(t, c.env))
			if st.Error != "" || st.Type != c.env.Type.String() || st.Origin != string(c.origin) || st.Summary != c.summary {
				t.Fatalf("step %+v, want type %s, origin %s, summary %q", st, c.env.Type, c.origin, c.summary)
			}
			if st.MessageID != c.want.MessageID || st.ReplyTo != c.want.ReplyTo || st.Sentence != c.want.Sentence || st.Status != c.want.Status ||
				(st.Final == nil) != (c.want.Final == nil) || (st.Final != nil && *st.Final != *c.want.Final) {
				t.Fatalf("links: messageId %q replyTo %q sequence %d final %v status %q; want %+v",
					st.MessageID, st.ReplyTo, st.Sentence, st.Final, st.Status, c.want)
			}
			if st.Envelope != nil {
				t.Fatal("envelope included without Envelopes")
			}
			if c.origin == subjects.OriginServer && st.StanzaID != -int32(seq) {
				t.Fatalf("server stanza id %d, want %d", st.StanzaID, -int32(seq))
			}
			if c.origin != subjects.OriginServer && st.StanzaID != c.env.StanzaID {
				t.Fatalf("stanza id %d, want %d", st.StanzaID, c.env.StanzaID)
			}
			b, err := json.Marshal(st)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > 1024 {
				t.Fatalf("step is %d bytes of JSON (audio in it?): %s", len(b), b)
			}
		})
	}
}

func subjectOf(o subjects.Origin, t protocol.MessageType) string {
	switch o {
	case subjects.OriginClient:
		return subjects.Client(cid, t)
	case subjects.OriginServer:
		return subjects.Server(cid, t)
	}
	return subjects.Agent(cid, t)
}

// TestJSON: the step's JSON names, link fields omitted when absent, times
// in RFC 3339 with nanoseconds and in Unix milliseconds.
func TestJSON(t *testing.T) {
	var tl timeline.Timeline
	at := time.Date(2026, 5, 1, 12, 0, 0, 123456789, time.UTC)
	env := protocol.New(cid, &protocol.AssistantSentence{PreviousID: "am_a", ConversationID: cid, Sequence: 1, Text: "Hi.", IsFinal: protocol.Ptr(false)})
	b, _ := json.Marshal(tl.Step(7, subjects.Server(cid, env.Type), at, encode(t, env)))
	want := `{"seq":7,"time":"2026-05-01T12:00:00.123456789Z","timeMs":1777636800123,"offsetMs":0,"gapMs":0,"origin":"server","type":"AssistantSentence",` +
		`"stanzaId":-7,"summary":"#1 \"Hi.\"","messageId":"am_a","sequence":1,"final":false}`
	if string(b) != want {
		t.Fatalf("JSON\n%s\nwant\n%s", b, want)
	}
	cfg := protocol.Envelope{StanzaID: 1, ConversationID: cid, Type: protocol.TypeConfiguration, Body: &protocol.Configuration{ConversationID: protocol.Ptr(cid)}}
	b, _ = json.Marshal(tl.Step(8, subjects.Client(cid, cfg.Type), at.Add(time.Second), encode(t, cfg)))
	for _, absent := range []string{"messageId", "replyTo", "sequence", "final", "status", "envelope", "error"} {
		if strings.Contains(string(b), `"`+absent+`"`) {
			t.Fatalf("%s in %s", absent, b)
		}
	}
}

// TestOffsetsAndGaps: offsets from the first envelope, gaps from the one
// before; an anchored timeline (a later page) continues the same offsets;
// an unknown previous envelope is a gap of 0.
func TestOffsetsAndGaps(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	data := encode(t, protocol.New(cid, &protocol.StartAnswer{ID: "am_a", PreviousID: "am_u", ConversationID: cid}))
	subject := subjects.Server(cid, protocol.TypeStartAnswer)
	at := []time.Time{t0, t0.Add(250 * time.Millisecond), t0.Add(1250 * time.Millisecond), t0.Add(1300 * time.Millisecond)}
	var whole timeline.Timeline
	var steps []timeline.Step
	for i, a := range at {
		steps = append(steps, whole.Step(uint64(i+1), subject, a, data))
	}
	for i, want := range [][2]int64{{0, 0}, {250, 250}, {1250, 1000}, {1300, 50}} {
		if steps[i].OffsetMs != want[0] || steps[i].GapMs != want[1] {
			t.Fatalf("step %d: offset %d gap %d, want %v", i, steps[i].OffsetMs, steps[i].GapMs, want)
		}
	}
	var page timeline.Timeline
	page.Anchor(at[0], at[1])
	if st := page.Step(3, subject, at[2], data); st.OffsetMs != steps[2].OffsetMs || st.GapMs != steps[2].GapMs {
		t.Fatalf("anchored step %+v, want %+v", st, steps[2])
	}
	var unknown timeline.Timeline
	unknown.Anchor(at[0], time.Time{})
	if st := unknown.Step(3, subject, at[2], data); st.OffsetMs != 1250 || st.GapMs != 0 {
		t.Fatalf("step after an unknown one: offset %d gap %d, want 1250 0", st.OffsetMs, st.GapMs)
	}
}

func TestInvalidAndEnvelopes(t *testing.T) {
	tl := timeline.Timeline{Envelopes: true}
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	bad := tl.Step(1, subjects.Client(cid, protocol.TypeUserMessage), at, []byte{0xc1})
	if bad.Type != "invalid" || bad.Error == "" || bad.Origin != "client" || bad.Envelope != nil {
		t.Fatalf("invalid step %+v", bad)
	}
	env := protocol.New(cid, &protocol.StartAnswer{ID: "am_a", PreviousID: "am_u", ConversationID: cid})
	st := tl.Step(2, subjects.Server(cid, env.Type), at, encode(t, env))
	var got struct {
		Body struct {
			ID string `json:"id"`
		} `json:"body"`
	}
	if err := json.Unmarshal(st.Envelope, &got); err != nil || got.Body.ID != "am_a" {
		t.Fatalf("envelope %s: %v", st.Envelope, err)
	}
}
