package text_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/services/memory"
)

// rememberVia stores a memory for user through memory.action, as the REST API does.
func (s *stack) remember(user, content string) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id := protocol.NewID("amem")
	resp, err := rpc.MemoryAct(ctx, s.nc, rpc.MemoryActionRequest{UserID: user, Action: protocol.MemoryAction{
		ID: protocol.NewID("amema"), Action: protocol.MemoryActionActionCreate, Timestamp: time.Now().UnixMilli(),
		Memory: &protocol.MemoryActionMemory{ID: &id, Content: content}}})
	if err != nil {
		s.t.Fatal(err)
	}
	return resp.MemoryID
}

func TestMemoryRetrievalTurn(t *testing.T) {
	s := newStack(t, options{memory: func(c *memory.Config) { c.Threshold = 0.01 }})
	mid := s.remember("alice", "The user's dog is called Biscuit.")
	s.remember("bob", "Bob's dog is called Rex.")
	s.chat.On(fakeopenai.LastUserContains("dog"), fakeopenai.Text("Your dog is called Biscuit."))
	c := s.open(t, aliceKey, "", 0)
	uid := c.say("What is my dog called?")
	start, ss, envs := c.answer(uid)
	if textOf(ss) != "Your dog is called Biscuit." {
		t.Fatalf("answer %q", textOf(ss))
	}
	var traces []*protocol.MemoryTrace
	for _, e := range envs {
		if b, ok := e.Body.(*protocol.MemoryTrace); ok {
			traces = append(traces, b)
		}
	}
	if len(traces) == 0 || traces[0].MemoryID != mid || traces[0].MessageID != start.ID {
		t.Fatalf("memory traces %+v", traces)
	}
	// Each trace says which search found the memory (issue 30 item 6).
	if q := traces[0].QueryPrompt; q == nil || *q != "What is my dog called?" || traces[0].QueryPromptMeta["embeddingModel"] == nil ||
		traces[0].QueryPromptMeta["threshold"] != 0.01 {
		t.Fatalf("trace query %v meta %v", traces[0].QueryPrompt, traces[0].QueryPromptMeta)
	}
	for _, tr := range traces {
		if strings.Contains(tr.Content, "Rex") {
			t.Fatal("another user's memory was used")
		}
	}
	// The memory reached the model's context.
	reqs := s.chat.Requests()
	if !strings.Contains(string(reqs[len(reqs)-1].Body), "Biscuit") {
		t.Fatal("the memory is not in the model's context")
	}
	s.eventually("memory_used row", func(ctx context.Context) error {
		var n int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM alicia_memory_used WHERE message_id = $1 AND memory_id = $2 AND conversation_id = $3
			AND query_prompt = 'What is my dog called?' AND query_prompt_meta ? 'searchMs' AND query_prompt_meta ? 'prefetched'`,
			start.ID, mid, c.cid).Scan(&n); err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("%d memory_used rows", n)
		}
		return nil
	})
}

func TestExtractionCreatesAMemory(t *testing.T) {
	s := newStack(t, options{})
	s.mem.On(fakeopenai.LastUserContains("Lisbon"),
		fakeopenai.Text(`{"memories": [{"content": "The user lives in Lisbon.", "tags": ["home"], "importance": 0.8}]}`))
	s.chat.On(fakeopenai.LastUserContains("Lisbon"), fakeopenai.Text("Lisbon is lovely."))
	c := s.open(t, aliceKey, "", 0)
	uid := c.say("I live in Lisbon, by the way.")
	c.answer(uid)
	s.eventually("extracted memory", func(ctx context.Context) error {
		var content, source string
		var hasEmbedding bool
		if err := s.pool.QueryRow(ctx, `SELECT content, source_type, embeddings IS NOT NULL FROM alicia_memory WHERE user_id = 'alice'`).
			Scan(&content, &source, &hasEmbedding); err != nil {
			return err
		}
		if content != "The user lives in Lisbon." || source != "extraction" || !hasEmbedding {
			return fmt.Errorf("memory %q source %s embedding %v", content, source, hasEmbedding)
		}
		return nil
	})
}

func TestOtherUsersConversationIsRefused(t *testing.T) {
	s := newStack(t, options{})
	c := s.open(t, aliceKey, "", 0)
	c.say("hello")
	c.until(isFinal)
	bob := s.dial(t, bobKey)
	bob.cid = c.cid
	bob.send(&protocol.Configuration{ConversationID: &c.cid})
	e := bob.until(func(e protocol.Envelope) bool { return e.Type == protocol.TypeErrorMessage })
	if code := e.Body.(*protocol.ErrorMessage).Code; code != protocol.CodeForbidden {
		t.Fatalf("code %d, want 203", code)
	}
	// And over REST.
	req, _ := http.NewRequest(http.MethodGet, s.base+"/v1/conversations/"+c.cid, nil)
	req.Header.Set("Authorization", "Bearer "+bobKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("REST status %d, want 403", resp.StatusCode)
	}
}

func TestMalformedInputKeepsTheConnection(t *testing.T) {
	s := newStack(t, options{})
	c := s.open(t, aliceKey, "", 0)
	cases := []struct {
		name  string
		frame []byte
		code  int32
	}{
		{"not msgpack", []byte{0xc1, 0x00, 0x13}, protocol.CodeMalformed},
		{"unknown type", mustEncodeRaw(t, map[string]any{"stanzaId": 5, "type": 999, "body": map[string]any{}}), protocol.CodeUnknownType},
		{"invalid body", mustEncodeRaw(t, map[string]any{"stanzaId": 6, "type": 2, "body": map[string]any{"id": 7}}), protocol.CodeInvalidBody},
		{"internal type", mustEncodeRaw(t, map[string]any{"stanzaId": 7, "type": 61, "body": map[string]any{"name": "calculator", "enabled": false}}), protocol.CodeUnknownType},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := c.c.Write(context.Background(), websocket.MessageBinary, tc.frame); err != nil {
				t.Fatal(err)
			}
			e := c.until(func(e protocol.Envelope) bool { return e.Type == protocol.TypeErrorMessage })
			if got := e.Body.(*protocol.ErrorMessage).Code; got != tc.code {
				t.Fatalf("code %d, want %d", got, tc.code)
			}
		})
	}
	// Still alive: a normal turn works on the same connection.
	c.next = 10
	s.chat.On(fakeopenai.LastUserContains("still"), fakeopenai.Text("Yes, still here."))
	uid := c.say("Are you still there?")
	if _, ss, _ := c.answer(uid); textOf(ss) != "Yes, still here." {
		t.Fatalf("answer %q", textOf(ss))
	}
}

func TestBackendFailureGives503AndRecovers(t *testing.T) {
	s := newStack(t, options{})
	s.chat.SetFault(fakeopenai.Fault{Status: http.StatusInternalServerError})
	c := s.open(t, aliceKey, "", 0)
	uid := c.say("Hello?")
	var start *protocol.StartAnswer
	e := c.until(func(e protocol.Envelope) bool {
		if b, ok := e.Body.(*protocol.StartAnswer); ok && b.PreviousID == uid {
			start = b
		}
		return e.Type == protocol.TypeErrorMessage
	})
	em := e.Body.(*protocol.ErrorMessage)
	if em.Code != protocol.CodeBackendUnavailable || !em.Recoverable {
		t.Fatalf("ErrorMessage %+v", em)
	}
	if start != nil {
		s.eventually("answer failed", func(ctx context.Context) error {
			var status string
			if err := s.pool.QueryRow(ctx, `SELECT completion_status::text FROM alicia_messages WHERE id = $1`, start.ID).Scan(&status); err != nil {
				return err
			}
			if status != "failed" {
				return fmt.Errorf("status %s", status)
			}
			return nil
		})
	}
	// The backend comes back; the next turn (after the breaker's cool-down) works.
	s.chat.SetFault(fakeopenai.Fault{})
	s.chat.On(fakeopenai.LastUserContains("again"), fakeopenai.Text("I am back."))
	deadline := time.Now().Add(10 * time.Second)
	for {
		uid2 := c.say("Hello again?")
		envs, last := c.collect(func(e protocol.Envelope) bool { return isFinal(e) || e.Type == protocol.TypeErrorMessage })
		if isFinal(last) {
			var got []string
			for _, e := range envs {
				if b, ok := e.Body.(*protocol.AssistantSentence); ok && b.Text != "" {
					got = append(got, b.Text)
				}
			}
			if strings.Join(got, " ") != "I am back." {
				t.Fatalf("answer after recovery %q", got)
			}
			_ = uid2
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing after recovery: %+v", last.Body)
		}
	}
}

func mustEncodeRaw(t *testing.T, v map[string]any) []byte {
	t.Helper()
	b, err := msgpackMarshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func msgpackMarshal(v any) ([]byte, error) { return msgpack.Marshal(v) }
