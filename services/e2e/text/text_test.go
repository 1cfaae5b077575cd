// Package e2e_test holds the end-to-end tests of text conversations: a
// WebSocket client talks to the real gateway, and the real persistence,
// llm and memory services answer over embedded JetStream and Postgres.
package text_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

func TestTextTurnEndToEnd(t *testing.T) {
	s := newStack(t, options{})
	s.chat.On(fakeopenai.LastUserContains("weather"),
		fakeopenai.Text("It is sunny in Lisbon today. Expect 24.5 degrees at noon! Take a hat."))
	c := s.open(t, aliceKey, "", 0)
	if !strings.HasPrefix(c.cid, "ac_") {
		t.Fatalf("conversation id %q", c.cid)
	}
	uid := c.say("What is the weather like?")
	start, sentences, _ := c.answer(uid)

	want := []string{"It is sunny in Lisbon today.", "Expect 24.5 degrees at noon!", "Take a hat."}
	var got []string
	for i, snt := range sentences {
		if int(snt.Sequence) != i+1 {
			t.Errorf("sentence %d has sequence %d", i, snt.Sequence)
		}
		if snt.Text != "" {
			got = append(got, snt.Text)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("sentences %q, want %q", got, want)
	}
	if start.PreviousID != uid {
		t.Fatalf("StartAnswer.previousId %s, want %s", start.PreviousID, uid)
	}

	// The rows are persistence's mapping: the user message, the assistant message
	// chained to it and completed with the assembled contents, one sentence
	// row per sentence, the branch head on the answer, the owner alice.
	s.eventually("rows", func(ctx context.Context) error {
		var owner, tip, status, contents, prev string
		var seq int32
		if err := s.pool.QueryRow(ctx, `SELECT c.user_id, c.tip_message_id, m.completion_status::text, m.contents, m.previous_id, m.sequence_number
			FROM alicia_conversations c JOIN alicia_messages m ON m.id = $2 WHERE c.id = $1`, c.cid, start.ID).
			Scan(&owner, &tip, &status, &contents, &prev, &seq); err != nil {
			return err
		}
		if owner != "alice" || tip != start.ID || status != "completed" || prev != uid || seq != 2 {
			return fmt.Errorf("owner %s tip %s status %s prev %s seq %d", owner, tip, status, prev, seq)
		}
		if strings.TrimSpace(contents) != strings.Join(want, " ") {
			return fmt.Errorf("contents %q", contents)
		}
		var n int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM alicia_sentences WHERE message_id = $1 AND text <> ''`, start.ID).Scan(&n); err != nil {
			return err
		}
		if n != len(want) {
			return fmt.Errorf("%d sentence rows", n)
		}
		var userContent, role string
		if err := s.pool.QueryRow(ctx, `SELECT contents, message_role::text FROM alicia_messages WHERE id = $1 AND sequence_number = 1`, uid).
			Scan(&userContent, &role); err != nil {
			return err
		}
		if userContent != "What is the weather like?" || role != "user" {
			return fmt.Errorf("user row %q %s", userContent, role)
		}
		return nil
	})

	// The model saw the system prompt and the user's message.
	reqs := s.chat.Requests()
	last := reqs[len(reqs)-1]
	if last.Messages[0].Role != "system" || last.LastUser() != "What is the weather like?" {
		t.Fatalf("model request: first role %s, last user %q", last.Messages[0].Role, last.LastUser())
	}
}

func TestReconnectMidAnswerGetsExactlyWhatWasMissed(t *testing.T) {
	s := newStack(t, options{})
	words := fakeopenai.Words("One. Two. Three. Four. Five. Six. Seven. Eight. Nine. Ten.")
	s.chat.On(fakeopenai.LastUserContains("count"), fakeopenai.Turn{Text: words})
	s.chat.SetFault(fakeopenai.Fault{ChunkDelay: 40 * time.Millisecond})
	c := s.open(t, aliceKey, "", 0)
	uid := c.say("Please count to ten.")
	// Read until two sentences have arrived, then drop the connection.
	before, _ := c.collect(func(e protocol.Envelope) bool {
		b, ok := e.Body.(*protocol.AssistantSentence)
		return ok && b.Sequence == 2
	})
	lastSeen := c.lastIn
	c.c.CloseNow()

	c2 := s.open(t, aliceKey, c.cid, lastSeen)
	c2.next = c.next // a resumed client keeps counting its stanza ids
	after, _ := c2.collect(isFinal)

	// Every server envelope of the conversation exactly once, in order:
	// the stanza ids received are the stream's own server envelopes up to
	// the final sentence, none missing, none twice.
	var got []int32
	for _, e := range append(before, after...) {
		if e.StanzaID < 0 {
			got = append(got, e.StanzaID)
		}
	}
	cons, err := s.js.OrderedConsumer(context.Background(), "CONVERSATIONS", jetstream.OrderedConsumerConfig{FilterSubjects: []string{subjects.ServerAll(c.cid)}})
	if err != nil {
		t.Fatal(err)
	}
	var want []int32
	for len(want) == 0 || want[len(want)-1] > got[len(got)-1] {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatalf("reading the stream: %v (have %v)", err, want)
		}
		md, _ := m.Metadata()
		if id := -int32(md.Sequence.Stream); id <= got[0] { // open() read the Configuration reply
			want = append(want, id)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("server stanza ids received across the reconnect\n got %v\nwant %v", got, want)
	}
	var texts []string
	for _, e := range append(before, after...) {
		if b, ok := e.Body.(*protocol.AssistantSentence); ok && b.Text != "" {
			texts = append(texts, b.Text)
		}
	}
	wantTexts := []string{"One.", "Two.", "Three.", "Four.", "Five.", "Six.", "Seven.", "Eight.", "Nine.", "Ten."}
	if !slices.Equal(texts, wantTexts) {
		t.Fatalf("sentences across the reconnect %q, want %q", texts, wantTexts)
	}
	_ = uid
}

func TestStopMidAnswerKeepsThePartialAnswer(t *testing.T) {
	s := newStack(t, options{})
	s.chat.On(fakeopenai.LastUserContains("story"),
		fakeopenai.Turn{Text: fakeopenai.Words(strings.Repeat("Once upon a time there was a fox. ", 40))})
	s.chat.SetFault(fakeopenai.Fault{ChunkDelay: 20 * time.Millisecond})
	c := s.open(t, aliceKey, "", 0)
	uid := c.say("Tell me a long story.")
	var start *protocol.StartAnswer
	c.until(func(e protocol.Envelope) bool {
		if b, ok := e.Body.(*protocol.StartAnswer); ok && b.PreviousID == uid {
			start = b
		}
		b, ok := e.Body.(*protocol.AssistantSentence)
		return ok && start != nil && b.Sequence == 2
	})
	stopped := time.Now()
	c.send(&protocol.ControlStop{ConversationID: c.cid, TargetID: &start.ID, StopType: protocol.Ptr(protocol.ControlStopStopTypeGeneration)})
	// The model stream is cancelled: the fake sees its request end.
	testkit.Eventually(t, 2*time.Second, func() bool { return s.chat.Active() == 0 }, "model stream closed after ControlStop")
	t.Logf("model stream closed %v after ControlStop was sent", time.Since(stopped))
	s.eventually("answer kept partial and interrupted", func(ctx context.Context) error {
		var status, contents string
		var interrupted bool
		if err := s.pool.QueryRow(ctx, `SELECT completion_status::text, contents, interrupted_at IS NOT NULL FROM alicia_messages WHERE id = $1`, start.ID).
			Scan(&status, &contents, &interrupted); err != nil {
			return err
		}
		if status != "completed" || !interrupted || !strings.HasPrefix(contents, "Once upon a time there was a fox. Once upon a time") {
			return fmt.Errorf("status %s interrupted %v contents %q", status, interrupted, contents)
		}
		if strings.Count(contents, "fox") >= 40 {
			return fmt.Errorf("the whole story was kept: %q", contents)
		}
		return nil
	})
	// The next turn works.
	s.chat.SetFault(fakeopenai.Fault{})
	s.chat.On(fakeopenai.LastUserContains("short"), fakeopenai.Text("Fine."))
	uid2 := c.say("A short one then.")
	_, ss, _ := c.answer(uid2)
	if textOf(ss) != "Fine." {
		t.Fatalf("next answer %q", textOf(ss))
	}
}

func TestRegenerateMakesASiblingAndMovesTheHead(t *testing.T) {
	s := newStack(t, options{})
	s.chat.On(fakeopenai.LastUserContains("joke"), fakeopenai.Text("First joke."), fakeopenai.Text("Second joke."))
	c := s.open(t, aliceKey, "", 0)
	uid := c.say("Tell me a joke.")
	first, _, _ := c.answer(uid)
	c.send(&protocol.ControlVariation{ConversationID: c.cid, TargetID: first.ID, Mode: protocol.ControlVariationModeRegenerate})
	second, ss, envs := c.answer(uid)
	if second.ID == first.ID || textOf(ss) != "Second joke." {
		t.Fatalf("regenerated %s %q", second.ID, textOf(ss))
	}
	var branch *protocol.BranchUpdate
	for _, e := range envs {
		if b, ok := e.Body.(*protocol.BranchUpdate); ok {
			branch = b
		}
	}
	if branch == nil {
		branch = c.until(func(e protocol.Envelope) bool { return e.Type == protocol.TypeBranchUpdate }).Body.(*protocol.BranchUpdate)
	}
	if branch.ParentMessageID != uid || branch.NewSibling.ID != second.ID || !slices.Contains(branch.SiblingIds, first.ID) {
		t.Fatalf("BranchUpdate %+v", branch)
	}
	s.eventually("head moved to the sibling", func(ctx context.Context) error {
		var tip string
		var siblings int
		if err := s.pool.QueryRow(ctx, `SELECT tip_message_id, (SELECT count(*) FROM alicia_messages WHERE previous_id = $2)
			FROM alicia_conversations WHERE id = $1`, c.cid, uid).Scan(&tip, &siblings); err != nil {
			return err
		}
		if tip != second.ID || siblings != 2 {
			return fmt.Errorf("tip %s siblings %d", tip, siblings)
		}
		return nil
	})
}

func TestToolCallTurn(t *testing.T) {
	s := newStack(t, options{})
	s.chat.On(fakeopenai.All(fakeopenai.LastUserContains("17 times 23"), fakeopenai.Not(fakeopenai.HasToolResult())),
		fakeopenai.Calls(fakeopenai.ToolCall{Name: "calculator", Arguments: `{"expression": "17*23"}`}))
	s.chat.On(fakeopenai.HasToolResult(), fakeopenai.Text("17 times 23 is 391."))
	c := s.open(t, aliceKey, "", 0)
	uid := c.say("What is 17 times 23?")
	_, ss, envs := c.answer(uid)
	var req *protocol.ToolUseRequest
	var res *protocol.ToolUseResult
	for _, e := range envs {
		switch b := e.Body.(type) {
		case *protocol.ToolUseRequest:
			req = b
		case *protocol.ToolUseResult:
			res = b
		}
	}
	if req == nil || res == nil || req.ToolName != "calculator" || !res.Success || res.RequestID != req.ID {
		t.Fatalf("tool request %+v result %+v", req, res)
	}
	if !strings.Contains(fmt.Sprint(res.Result), "391") {
		t.Fatalf("tool result %v", res.Result)
	}
	if textOf(ss) != "17 times 23 is 391." {
		t.Fatalf("answer %q", textOf(ss))
	}
	// The model got the tool result back.
	var sawResult bool
	for _, r := range s.chat.Requests() {
		for _, m := range r.Messages {
			if m.Role == "tool" && strings.Contains(m.Content, "391") {
				sawResult = true
			}
		}
	}
	if !sawResult {
		t.Fatal("the tool result never reached the model")
	}
	s.eventually("tool use row", func(ctx context.Context) error {
		var status string
		var result []byte
		if err := s.pool.QueryRow(ctx, `SELECT status::text, tool_result::text FROM alicia_tool_uses WHERE id = $1`, req.ID).Scan(&status, &result); err != nil {
			return err
		}
		if status != "success" || !strings.Contains(string(result), "391") {
			return fmt.Errorf("status %s result %s", status, result)
		}
		return nil
	})
}

// TestServicesStartedInReverseOrderConverge starts gateway, llm and memory
// before persistence, against an empty database: each waits for the schema
// (saying so in its log) instead of exiting, persistence applies the
// migrations, and then a turn goes through as usual.
func TestServicesStartedInReverseOrderConverge(t *testing.T) {
	logs := &testkit.SyncBuffer{}
	waiting := func(services ...string) {
		for _, svc := range services {
			testkit.Eventually(t, 30*time.Second, func() bool {
				for _, line := range strings.Split(logs.String(), "\n") {
					if strings.Contains(line, `"service":"`+svc+`"`) && strings.Contains(line, "waiting for the database") &&
						strings.Contains(line, "migrations not applied yet") {
						return true
					}
				}
				return false
			}, "%s did not log that it waits for the schema:\n%s", svc, logs)
		}
	}
	s := newStack(t, options{reverse: true, waitingFor: waiting, log: zerolog.New(logs)})
	s.chat.On(fakeopenai.LastUserContains("order"), fakeopenai.Text("Everything started in the end."))
	c := s.open(t, aliceKey, "", 0)
	uid := c.say("Did the start order matter?")
	_, sentences, _ := c.answer(uid)
	if len(sentences) == 0 || sentences[0].Text != "Everything started in the end." {
		t.Fatalf("sentences %+v", sentences)
	}
	if !strings.Contains(logs.String(), "database schema ready") {
		t.Fatalf("no service logged that the schema became ready:\n%s", logs)
	}
}
