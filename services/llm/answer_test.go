package llm_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/sentence"
)

// A user message is answered with StartAnswer, then one sentence per
// sentence in order, the last marked final, and the rows match.
func TestStreamedAnswer(t *testing.T) {
	h := newHarness(t)
	h.replica(h.config(h.fake))
	cases := []struct {
		name   string
		deltas []string
		want   []string
	}{
		{"sentences", fakeopenai.Words("Hello there! The answer is 4.2, see https://example.com/a.b for more. Dr. Smith agrees."),
			[]string{"Hello there!", "The answer is 4.2, see https://example.com/a.b for more.", "Dr. Smith agrees."}},
		{"trailing newline", []string{"First line.", "\nSecond", " line.\n"}, []string{"First line.", "\nSecond line."}},
		{"markdown keeps its lines", []string{"Fruit:\n", "- apples\n- pears\n\n", "| a | b |\n|---|---|\n| 1 | 2 |\n\n", "```go\nx := 1\n```\nDone."},
			[]string{"Fruit:", "\n- apples", "\n- pears", "\n\n| a | b |", "\n|---|---|", "\n| 1 | 2 |", "\n\n```go\nx := 1\n```", "\nDone."}},
		{"one sentence", []string{"Sure"}, []string{"Sure"}},
		{"nothing", nil, []string{""}},
	}
	cid := h.conversation()
	w := h.watch(cid)
	var history []string
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h.fake.Enqueue(fakeopenai.Turn{Text: c.deltas})
			uid := h.say(cid, "question "+c.name)
			sa, sents, _ := w.answered(t, uid)
			if sa.AnswerType == nil || *sa.AnswerType != protocol.StartAnswerAnswerTypeText {
				t.Errorf("answerType = %v", sa.AnswerType)
			}
			var got []string
			for i, s := range sents {
				got = append(got, s.Text)
				if s.Sequence != int32(i+1) || s.ID == nil {
					t.Errorf("sentence %d: sequence %d id %v", i, s.Sequence, s.ID)
				}
				if final := s.IsFinal != nil && *s.IsFinal; final != (i == len(sents)-1) {
					t.Errorf("sentence %d final = %v", i, final)
				}
			}
			if strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Fatalf("sentences %q, want %q", got, c.want)
			}
			r := h.row(t, sa.ID, func(r row) bool { return r.status == "completed" })
			if want := sentence.Join(c.want); r.contents != want || r.role != "assistant" || r.previous == nil || *r.previous != uid {
				t.Fatalf("row %+v, want contents %q after %s", r, want, uid)
			}
			// The model saw the system prompt, the history and the question.
			req := h.fake.Requests()[len(h.fake.Requests())-1]
			if req.Messages[0].Role != "system" || !strings.Contains(req.Messages[0].Content, "voice assistant") {
				t.Errorf("system message = %+v", req.Messages[0])
			}
			var sent []string
			for _, m := range req.Messages[1:] {
				sent = append(sent, m.Role+":"+m.Content)
			}
			want := append(append([]string(nil), history...), "user:question "+c.name)
			if strings.Join(sent, "\n") != strings.Join(want, "\n") {
				t.Fatalf("context sent:\n%s\nwant:\n%s", strings.Join(sent, "\n"), strings.Join(want, "\n"))
			}
			history = append(history, "user:question "+c.name)
			if r.contents != "" {
				history = append(history, "assistant:"+r.contents)
			}
		})
	}
}

// A client whose Configuration lists features without "streaming" gets one
// AssistantMessage; persistence completes the StartAnswer row from it.
func TestNonStreamingClient(t *testing.T) {
	h := newHarness(t)
	h.replica(h.config(h.fake))
	cid := h.conversation(protocol.ConfigurationFeaturesElemToolUse)
	w := h.watch(cid)
	h.fake.Enqueue(fakeopenai.Text("Paris is the capital of France. It is on the Seine."))
	uid := h.say(cid, "capital of France?")
	var msg *protocol.AssistantMessage
	envs := w.until(t, 10*time.Second, "AssistantMessage", func(envs []seen) bool {
		ms := bodies[*protocol.AssistantMessage](envs)
		if len(ms) > 0 {
			msg = ms[0]
		}
		return msg != nil
	})
	sa := answerOf(envs, uid)
	if sa == nil || sa.ID != msg.ID || msg.PreviousID == nil || *msg.PreviousID != uid {
		t.Fatalf("StartAnswer %+v, AssistantMessage %+v", sa, msg)
	}
	if msg.Content != "Paris is the capital of France. It is on the Seine." {
		t.Fatalf("content %q", msg.Content)
	}
	if n := len(bodies[*protocol.AssistantSentence](envs)); n != 0 {
		t.Fatalf("%d sentences sent to a non-streaming client", n)
	}
	h.row(t, msg.ID, func(r row) bool { return r.status == "completed" && r.contents == msg.Content })

	// A new Configuration asking for streaming takes effect for the next turn.
	h.client(cid, &protocol.Configuration{ConversationID: &cid, Features: []protocol.ConfigurationFeaturesElem{protocol.ConfigurationFeaturesElemStreaming}})
	h.fake.Enqueue(fakeopenai.Text("Now streamed."))
	uid2 := h.say(cid, "again")
	if _, sents, _ := w.answered(t, uid2); len(sents) != 1 || sents[0].Text != "Now streamed." {
		t.Fatalf("sentences %+v", sents)
	}
}

// Reasoning (reasoning_content and <think> blocks) becomes ReasoningSteps,
// one per paragraph, and never reaches the sentences.
func TestReasoning(t *testing.T) {
	h := newHarness(t)
	h.replica(h.config(h.fake))
	cid := h.conversation()
	w := h.watch(cid)
	h.fake.Enqueue(fakeopenai.Turn{
		Reasoning: []string{"The user asks", " for a sum.\n", "\nTwo plus two", " is four."},
		Text:      []string{"<thi", "nk>Check the ", "units.</th", "ink>The answer", " is 4. <think>Done.</think>Anything else?"},
	})
	uid := h.say(cid, "2+2?")
	sa, sents, envs := w.answered(t, uid)
	var texts []string
	for _, s := range sents {
		texts = append(texts, s.Text)
	}
	if got := strings.Join(texts, "|"); got != "The answer is 4.|Anything else?" {
		t.Fatalf("sentences %q", got)
	}
	var steps []string
	for i, r := range bodies[*protocol.ReasoningStep](envs) {
		if r.MessageID != sa.ID || r.Sequence != int32(i+1) {
			t.Errorf("step %d: %+v", i, r)
		}
		steps = append(steps, r.Content)
	}
	if got := strings.Join(steps, "|"); got != "The user asks for a sum.|Two plus two is four.|Check the units.|Done." {
		t.Fatalf("reasoning steps %q", got)
	}
	h.row(t, sa.ID, func(r row) bool { return r.status == "completed" && r.contents == "The answer is 4. Anything else?" })
	var n int
	if err := h.pool.QueryRow(context.Background(), `SELECT count(*) FROM alicia_reasoning_steps WHERE message_id = $1`, sa.ID).Scan(&n); err != nil || n != 4 {
		t.Fatalf("reasoning rows = %d, %v", n, err)
	}
}

// A user who does not wait for the answer: the second message is chained to
// the first by persistence, the first answer becomes its sibling, and the
// second turn's context is its own branch.
func TestMessagesSentWithoutWaiting(t *testing.T) {
	h := newHarness(t)
	h.replica(h.config(h.fake))
	cid := h.conversation()
	w := h.watch(cid)
	h.fake.SetFault(fakeopenai.Fault{ChunkDelay: 10 * time.Millisecond})
	h.fake.Enqueue(fakeopenai.Text("First answer, slowly streamed."), fakeopenai.Text("Second answer."))
	u1 := h.say(cid, "first")
	u2 := h.say(cid, "second")
	w.answered(t, u1)
	a2, _, _ := w.answered(t, u2)
	if got := lastContext(h.fake); strings.Join(got, "|") != "user:first|user:second" {
		t.Fatalf("context of the second turn %q", got)
	}
	h.row(t, u2, func(r row) bool { return r.previous != nil && *r.previous == u1 })
	h.row(t, a2.ID, func(r row) bool { return r.status == "completed" })
	if tip := h.tip(cid); tip != a2.ID {
		t.Fatalf("branch head %s, want %s", tip, a2.ID)
	}
}
