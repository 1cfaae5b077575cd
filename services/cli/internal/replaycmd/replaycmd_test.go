package replaycmd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/services/cli/internal/replaycmd"
)

func publishTurn(t *testing.T, pub *bus.Publisher, cid string) {
	t.Helper()
	ctx := context.Background()
	if _, err := pub.PublishClient(ctx, protocol.Envelope{StanzaID: 1, ConversationID: cid, Type: protocol.TypeUserMessage,
		Body: &protocol.UserMessage{ID: "am_u", ConversationID: cid, Content: "What time is it?"}}); err != nil {
		t.Fatal(err)
	}
	for _, body := range []protocol.Body{
		&protocol.StartAnswer{ID: "am_a", PreviousID: "am_u", ConversationID: cid},
		&protocol.ToolUseRequest{ID: "atu_1", MessageID: "am_a", ConversationID: cid, ToolName: "clock", Parameters: map[string]any{"tz": "UTC"}, Execution: "server"},
		&protocol.AssistantSentence{PreviousID: "am_a", ConversationID: cid, Sequence: 1, Text: "It is noon.", IsFinal: protocol.Ptr(true)},
	} {
		if _, err := pub.PublishServer(ctx, protocol.New(cid, body), ""); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTimeline(t *testing.T) {
	s := natstest.Run(t)
	nc := natstest.Connect(t, s)
	js := natstest.JetStream(t, nc)
	if err := bus.EnsureStreams(context.Background(), js, bus.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	pub := bus.NewPublisher(js)
	publishTurn(t, pub, "ac_other")
	publishTurn(t, pub, "ac_time")

	var out bytes.Buffer
	if err := replaycmd.Run(context.Background(), nc, replaycmd.Options{ConversationID: "ac_time"}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("timeline has %d lines, want header + 4:\n%s", len(lines), out.String())
	}
	for i, want := range []string{"client  UserMessage", "server  StartAnswer", "server  ToolUseRequest", "server  AssistantSentence"} {
		if !strings.Contains(lines[i+1], want) {
			t.Errorf("line %d = %q, want %q", i+1, lines[i+1], want)
		}
	}
	if !strings.Contains(lines[3], `clock({"tz":"UTC"})`) || !strings.Contains(lines[4], `#1 "It is noon." (final)`) {
		t.Errorf("summaries:\n%s", out.String())
	}

	out.Reset()
	if err := replaycmd.Run(context.Background(), nc, replaycmd.Options{ConversationID: "ac_time", JSON: true}, &out); err != nil {
		t.Fatal(err)
	}
	var steps []replaycmd.Step
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var st replaycmd.Step
		if err := json.Unmarshal([]byte(l), &st); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		steps = append(steps, st)
	}
	if len(steps) != 4 || steps[0].StanzaID != 1 || steps[1].StanzaID != -int32(steps[1].Sequence) || len(steps[3].Envelope) == 0 {
		t.Fatalf("steps = %+v", steps)
	}
	for i := 1; i < len(steps); i++ {
		d := steps[i].GapMs - (steps[i].OffsetMs - steps[i-1].OffsetMs)
		if steps[i].OffsetMs < steps[i-1].OffsetMs || steps[i].GapMs < 0 || d < -1 || d > 1 {
			t.Fatalf("offsets and gaps disagree: %+v", steps)
		}
	}

	if err := replaycmd.Run(context.Background(), nc, replaycmd.Options{ConversationID: "ac_none"}, &out); err == nil {
		t.Fatal("replay of an unknown conversation succeeded")
	}
	if err := replaycmd.Run(context.Background(), nc, replaycmd.Options{ConversationID: "bad.id"}, &out); err == nil {
		t.Fatal("invalid conversation id accepted")
	}
}

func TestFollow(t *testing.T) {
	s := natstest.Run(t)
	nc := natstest.Connect(t, s)
	js := natstest.JetStream(t, nc)
	if err := bus.EnsureStreams(context.Background(), js, bus.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	pub := bus.NewPublisher(js)
	publishTurn(t, pub, "ac_f")
	ctx, cancel := context.WithCancel(context.Background())
	out := &testkit.SyncBuffer{}
	done := make(chan error, 1)
	go func() { done <- replaycmd.Run(ctx, nc, replaycmd.Options{ConversationID: "ac_f", Follow: true}, out) }()
	testkit.Eventually(t, 5*time.Second, func() bool { return strings.Count(out.String(), "\n") == 5 }, "replayed part")
	if _, err := pub.PublishServer(context.Background(), protocol.New("ac_f", &protocol.AssistantSentence{PreviousID: "am_a", ConversationID: "ac_f", Sequence: 2, Text: "Later."}), ""); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return strings.Contains(out.String(), `#2 "Later."`) }, "followed envelope")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "AssistantSentence"); n != 2 {
		t.Fatalf("printed %d sentences, want 2 (no duplicates):\n%s", n, out.String())
	}
}

func TestTimelineOfAVoiceTurn(t *testing.T) {
	s := natstest.Run(t)
	nc := natstest.Connect(t, s)
	js := natstest.JetStream(t, nc)
	if err := bus.EnsureStreams(context.Background(), js, bus.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	pub := bus.NewPublisher(js)
	ctx := context.Background()
	cid := "ac_voice"
	publishTurn(t, pub, cid)
	for _, body := range []protocol.Body{
		&protocol.SentenceAudio{ConversationID: cid, MessageID: "am_a", SentenceID: "as_1", Sequence: 1, Format: "pcm_s16le_24000", DurationMs: 900, ByteSize: 43200},
		&protocol.SentencePlayout{ConversationID: cid, MessageID: "am_a", SentenceID: "as_1", Sequence: 1, Status: protocol.SentencePlayoutStatusInterrupted, PlayedMs: 420},
	} {
		if _, err := pub.PublishAgent(ctx, protocol.New(cid, body), ""); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if err := replaycmd.Run(ctx, nc, replaycmd.Options{ConversationID: cid}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 7 {
		t.Fatalf("timeline has %d lines, want header + 6:\n%s", len(lines), out.String())
	}
	if !strings.Contains(lines[5], "agent   SentenceAudio") || !strings.Contains(lines[5], "am_a #1 pcm_s16le_24000 900 ms, 43200 bytes") ||
		!strings.Contains(lines[6], "agent   SentencePlayout") || !strings.Contains(lines[6], "am_a #1 interrupted after 420 ms") {
		t.Fatalf("voice records:\n%s", out.String())
	}
}

// TestHostileTextIsPrintable: what a conversation holds reaches the
// terminal of `alicia replay` with its escape sequences shown, never run.
func TestHostileTextIsPrintable(t *testing.T) {
	s := natstest.Run(t)
	nc := natstest.Connect(t, s)
	js := natstest.JetStream(t, nc)
	if err := bus.EnsureStreams(context.Background(), js, bus.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.NewPublisher(js).PublishClient(context.Background(), protocol.Envelope{StanzaID: 1, ConversationID: "ac_evil", Type: protocol.TypeUserMessage,
		Body: &protocol.UserMessage{ID: "am_u", ConversationID: "ac_evil", Content: "hi\x1b]0;pwned\x07\u202e"}}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := replaycmd.Run(context.Background(), nc, replaycmd.Options{ConversationID: "ac_evil"}, &out); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); strings.ContainsAny(got, "\x1b\x07\u202e") || !strings.Contains(got, `pwned`) {
		t.Fatalf("replay printed %q", got)
	}
}
