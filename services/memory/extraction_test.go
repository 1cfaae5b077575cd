package memory_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// isExtraction matches the memory service's JSON-schema chat requests.
func isExtraction(r fakeopenai.Request) bool { return bytes.Contains(r.Body, []byte(`"json_schema"`)) }

// answerJSON is a scripted extraction answer, sent as one piece.
func answerJSON(s string) fakeopenai.Turn { return fakeopenai.Turn{Text: []string{s}} }

// extracted waits until the extraction consumer has acknowledged every
// final answer up to seq, with nothing left pending or redelivered.
func (s *stack) extracted(seq uint64) {
	s.t.Helper()
	testkit.EventuallyNoError(s.t, 20*time.Second, func() error {
		cons, err := s.js.Consumer(context.Background(), "CONVERSATIONS", s.cfg.ExtractionConsumer)
		if err != nil {
			return err
		}
		info, err := cons.Info(context.Background())
		if err != nil {
			return err
		}
		if info.AckFloor.Stream < seq || info.NumAckPending > 0 || info.NumRedelivered > 0 {
			return fmt.Errorf("ack floor %d (want ≥ %d), %d pending, %d redelivered", info.AckFloor.Stream, seq, info.NumAckPending, info.NumRedelivered)
		}
		return nil
	}, "extraction of the answers up to %d", seq)
}

func (s *stack) extractionRequests() []fakeopenai.Request {
	var out []fakeopenai.Request
	for _, r := range s.ai.Requests() {
		if isExtraction(r) {
			out = append(out, r)
		}
	}
	return out
}

func TestExtraction(t *testing.T) {
	s := newStack(t, stackOptions{})
	cid := "ac_extraction"
	s.ai.On(isExtraction,
		answerJSON(`{"memories": [{"content": "The user is allergic to peanuts.", "tags": ["Health", "food"], "importance": 0.8}]}`),
		answerJSON(`{"memories": [{"content": "The user is severely allergic to peanuts.", "tags": ["allergy", "health"], "importance": 0.6}]}`),
		answerJSON(`Sure! I will remember: {"memories": [`),
		answerJSON(`{"memories": []}`),
		answerJSON(`{"memories": [{"content": "The user has two cats named Miso and Tofu.", "tags": ["pets"], "importance": 0.5},
			{"content": "The user has two cats named Tofu and Miso!", "tags": ["cats"], "importance": 0.7},
			{"content": "The user works as a nurse.", "tags": ["work"], "importance": 0.6}]}`),
		answerJSON(`{"memories": [{"content": "The user works as a night nurse.", "tags": ["work"], "importance": 0.9}]}`),
	)

	var memID string
	t.Run("a turn creates a memory", func(t *testing.T) {
		s.client(cid, "alice", 1, &protocol.UserMessage{ID: "am_u1", ConversationID: cid, Content: "I'm allergic to peanuts, please remember that."})
		seq := s.server(cid, &protocol.AssistantMessage{ID: "am_a1", PreviousID: protocol.Ptr("am_u1"), ConversationID: cid, Content: "Noted: no peanuts for you."})
		s.extracted(seq)
		err := s.pool.QueryRow(context.Background(), `SELECT id FROM alicia_memory WHERE user_id = 'alice'`).Scan(&memID)
		if err != nil {
			t.Fatalf("no memory extracted: %v", err)
		}
		r, _ := s.row(memID)
		if r.Content != "The user is allergic to peanuts." || !r.HasEmbedding || r.SourceMessage != "am_u1" ||
			!slices.Equal(r.Tags, []string{"health", "food"}) || r.Importance != 0.8 || r.Source != "extraction" {
			t.Fatalf("extracted memory = %+v", r)
		}
		reqs := s.extractionRequests()
		if len(reqs) != 1 {
			t.Fatalf("%d extraction requests, want 1", len(reqs))
		}
		if u := reqs[0].LastUser(); !strings.Contains(u, "I'm allergic to peanuts") || !strings.Contains(u, "Noted: no peanuts") {
			t.Fatalf("extraction prompt = %q, want the user message and the answer", u)
		}
		if reqs[0].Messages[0].Role != "system" || !bytes.Contains(reqs[0].Body, []byte(`"memories"`)) {
			t.Fatalf("extraction request lacks the system prompt or the schema: %s", reqs[0].Body)
		}
	})

	t.Run("a near-duplicate updates the memory", func(t *testing.T) {
		s.client(cid, "alice", 2, &protocol.UserMessage{ID: "am_u2", ConversationID: cid, Content: "Actually, the allergy is severe."})
		s.server(cid, &protocol.StartAnswer{ID: "am_a2", PreviousID: "am_u2", ConversationID: cid})
		s.server(cid, &protocol.AssistantSentence{PreviousID: "am_a2", ConversationID: cid, Sequence: 1, Text: "Understood."})
		seq := s.server(cid, &protocol.AssistantSentence{PreviousID: "am_a2", ConversationID: cid, Sequence: 2, Text: "I'll be careful.", IsFinal: protocol.Ptr(true)})
		s.extracted(seq)
		if n := s.count(`SELECT count(*) FROM alicia_memory WHERE user_id = 'alice'`); n != 1 {
			t.Fatalf("%d memories, want the one updated", n)
		}
		r, _ := s.row(memID)
		if r.Content != "The user is severely allergic to peanuts." || !slices.Equal(r.Tags, []string{"health", "food", "allergy"}) || r.Importance != 0.8 {
			t.Fatalf("updated memory = %+v, want the new content, tags merged, importance kept at 0.8", r)
		}
		if sim := s.similarity(memID, "The user is severely allergic to peanuts."); sim < 0.9999 {
			t.Fatalf("embedding not of the new content (similarity %.4f)", sim)
		}
	})

	t.Run("malformed model JSON does no harm", func(t *testing.T) {
		s.client(cid, "alice", 3, &protocol.UserMessage{ID: "am_u3", ConversationID: cid, Content: "What's the weather like?"})
		seq := s.server(cid, &protocol.AssistantMessage{ID: "am_a3", PreviousID: protocol.Ptr("am_u3"), ConversationID: cid, Content: "Sunny."})
		s.extracted(seq) // acknowledged, not redelivered
		s.client(cid, "alice", 4, &protocol.UserMessage{ID: "am_u4", ConversationID: cid, Content: "Thanks!"})
		seq = s.server(cid, &protocol.AssistantMessage{ID: "am_a4", PreviousID: protocol.Ptr("am_u4"), ConversationID: cid, Content: "You're welcome."})
		s.extracted(seq)
		if n := len(s.extractionRequests()); n != 4 {
			t.Fatalf("%d extraction requests, want 4 (one per turn, none repeated)", n)
		}
		if n := s.count(`SELECT count(*) FROM alicia_memory`); n != 1 {
			t.Fatalf("%d memories after a malformed and an empty answer, want 1", n)
		}
	})

	t.Run("duplicates within an answer are merged; a transient LLM error is retried", func(t *testing.T) {
		s.ai.FailNext(1, 502)
		s.client(cid, "alice", 7, &protocol.UserMessage{ID: "am_u7", ConversationID: cid, Content: "Miso and Tofu, my two cats, keep me company after my shifts at the hospital."})
		seq := s.server(cid, &protocol.AssistantMessage{ID: "am_a7", PreviousID: protocol.Ptr("am_u7"), ConversationID: cid, Content: "They sound lovely."})
		s.extracted(seq)
		var tags []string
		var importance float64
		err := s.pool.QueryRow(context.Background(), `SELECT tags, importance FROM alicia_memory WHERE content LIKE 'The user has two cats%'`).Scan(&tags, &importance)
		if err != nil || !slices.Equal(tags, []string{"pets", "cats"}) || importance != 0.7 {
			t.Fatalf("merged cats memory: tags %v, importance %v, err %v", tags, importance, err)
		}
		if n := s.count(`SELECT count(*) FROM alicia_memory WHERE user_id = 'alice'`); n != 3 {
			t.Fatalf("%d memories, want 3 (peanuts, cats, nurse)", n)
		}
	})

	t.Run("an archived near-duplicate is not brought back", func(t *testing.T) {
		var nurse string
		if err := s.pool.QueryRow(context.Background(), `SELECT id FROM alicia_memory WHERE content = 'The user works as a nurse.'`).Scan(&nurse); err != nil {
			t.Fatal(err)
		}
		if _, err := s.act("alice", protocol.MemoryActionActionArchive, &protocol.MemoryActionMemory{ID: &nurse}); err != nil {
			t.Fatal(err)
		}
		s.client(cid, "alice", 8, &protocol.UserMessage{ID: "am_u8", ConversationID: cid, Content: "I work nights."})
		seq := s.server(cid, &protocol.AssistantMessage{ID: "am_a8", PreviousID: protocol.Ptr("am_u8"), ConversationID: cid, Content: "Night shifts are hard."})
		s.extracted(seq)
		if r, _ := s.row(nurse); r.Content != "The user works as a nurse." || !r.Archived {
			t.Fatalf("archived memory changed: %+v", r)
		}
		if n := s.count(`SELECT count(*) FROM alicia_memory WHERE user_id = 'alice'`); n != 3 {
			t.Fatalf("%d memories, want still 3", n)
		}
	})

	t.Run("an interrupted answer is not extracted", func(t *testing.T) {
		before := len(s.extractionRequests())
		s.client(cid, "alice", 9, &protocol.UserMessage{ID: "am_u5", ConversationID: cid, Content: "My sister is called Ana and she"})
		s.server(cid, &protocol.StartAnswer{ID: "am_a5", PreviousID: "am_u5", ConversationID: cid})
		s.server(cid, &protocol.AssistantSentence{PreviousID: "am_a5", ConversationID: cid, Sequence: 1, Text: "Tell me more."})
		s.client(cid, "alice", 10, &protocol.ControlStop{ConversationID: cid, TargetID: protocol.Ptr("am_a5")})
		seq := s.server(cid, &protocol.AssistantSentence{PreviousID: "am_a5", ConversationID: cid, Sequence: 2, Text: "About", IsFinal: protocol.Ptr(true)})
		s.extracted(seq)
		if n := len(s.extractionRequests()); n != before {
			t.Fatalf("%d extraction requests, want still %d", n, before)
		}
	})
}
