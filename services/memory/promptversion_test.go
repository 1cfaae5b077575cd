package memory_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/promptver"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/memory/internal/models"
)

// The extraction prompt is the memory_extraction component: the service
// seeds the built-in text as version 1, and an extraction asks with the
// version serving its conversation - the person's own, else the
// installation's.
func TestExtractionPromptVersions(t *testing.T) {
	s := newStack(t, stackOptions{})
	s.ai.On(isExtraction, answerJSON(`{"memories": []}`), answerJSON(`{"memories": []}`), answerJSON(`{"memories": []}`), answerJSON(`{"memories": []}`))
	seed := promptver.SeedID(promptver.MemoryExtraction, models.ExtractionPrompt)
	status := func(id, want string) {
		t.Helper()
		testkit.Eventually(t, 10*time.Second, func() bool {
			var got string
			_ = s.pool.QueryRow(context.Background(), `SELECT status FROM alicia_prompt_versions WHERE id = $1`, id).Scan(&got)
			return got == want
		}, "version %s %s", id, want)
	}
	status(seed, "active")
	activate := func(id, user, text string) {
		t.Helper()
		pv := &protocol.PromptVersion{ID: id, Component: promptver.MemoryExtraction, Version: 2, Text: text,
			Status: protocol.PromptVersionStatusActive, CreatedBy: "run:test", CreatedAt: time.Now().UnixMilli()}
		if user != "" {
			pv.UserID = &user
		}
		if _, err := s.pub.PublishSystem(context.Background(), protocol.New("", pv), ""); err != nil {
			t.Fatal(err)
		}
		status(id, "active")
	}
	systemOf := func(user, said string) string {
		t.Helper()
		cid := protocol.NewID("ac")
		uid, aid := protocol.NewID("am"), protocol.NewID("am")
		s.client(cid, user, 1, &protocol.UserMessage{ID: uid, ConversationID: cid, Content: said})
		s.extracted(s.server(cid, &protocol.AssistantMessage{ID: aid, PreviousID: &uid, ConversationID: cid, Content: "Noted."}))
		for _, r := range s.extractionRequests() {
			if strings.Contains(r.LastUser(), said) {
				return r.Messages[0].Content
			}
		}
		t.Fatalf("no extraction request for %q", said)
		return ""
	}
	if got := systemOf("alice", "I live in Lyon."); got != models.ExtractionPrompt {
		t.Fatalf("before any promotion the extraction asked with %q", got)
	}
	activate("pv_mx_all", "", "EXTRACT: only durable facts.")
	status(seed, "retired")
	if got := systemOf("bob", "I play chess."); got != "EXTRACT: only durable facts." {
		t.Fatalf("after the installation's promotion the extraction asked with %q", got)
	}
	activate("pv_mx_alice", "alice", "EXTRACT FOR ALICE.")
	if got := systemOf("alice", "I have a cat."); got != "EXTRACT FOR ALICE." {
		t.Fatalf("alice's extraction asked with %q, want her own version", got)
	}
	if got := systemOf("bob", "I like tea."); got != "EXTRACT: only durable facts." {
		t.Fatalf("bob's extraction asked with %q: alice's version reached him", got)
	}
}
