package persistence_test

import (
	"context"
	"testing"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// TestMemoryRating: a client's rate sets user_rating and nothing else; a
// rate of another person's memory changes nothing.
func TestMemoryRating(t *testing.T) {
	m := newMemStack(t)
	m.fromClient(protocol.MemoryActionActionCreate, "amem_rated", "Likes jazz")
	before := m.row("amem_rated")
	rate := func(id string, rating int32, meta map[string]any) {
		t.Helper()
		stanza := int32(m.queryInt(`SELECT last_client_stanza_id FROM alicia_conversations WHERE id = $1`, memCID)) + 1
		seq := m.client(memCID, stanza, &protocol.MemoryAction{ID: protocol.NewID("amact"), Action: protocol.MemoryActionActionRate, Timestamp: 1700000000000,
			Memory: &protocol.MemoryActionMemory{ID: &id, UserRating: &rating}}, meta)
		m.history(memCID, seq)
	}
	rate("amem_rated", 4, userMeta)
	if got := m.queryInt(`SELECT user_rating FROM alicia_memory WHERE id = 'amem_rated'`); got != 4 {
		t.Fatalf("user_rating = %d, want 4", got)
	}
	var others string
	if err := m.pool.QueryRow(context.Background(), `SELECT (to_jsonb(m) - 'id' - 'created_at' - 'updated_at' - 'embeddings' - 'user_rating')::text
		FROM alicia_memory m WHERE id = 'amem_rated'`).Scan(&others); err != nil {
		t.Fatal(err)
	}
	var want string
	if err := m.pool.QueryRow(context.Background(), `SELECT ($1::jsonb - 'user_rating')::text`, before).Scan(&want); err != nil {
		t.Fatal(err)
	}
	if others != want {
		t.Errorf("a rate changed more than user_rating:\nbefore %s\nafter  %s", want, others)
	}

	t.Run("another person's memory", func(t *testing.T) {
		m.system(&protocol.MemoryAction{ID: "ama_s_bob", Action: protocol.MemoryActionActionCreate, Timestamp: 1700000000000,
			Memory: &protocol.MemoryActionMemory{ID: ptr("amem_bobs"), Content: "Bob likes tea", Source: ptr("api")}}, map[string]any{"alicia.user_id": "bob"})
		rate("amem_rated", 2, userMeta) // a later rating of one's own applies in the same order
		seq := m.system(&protocol.MemoryAction{ID: "ama_s_rate_bob", Action: protocol.MemoryActionActionRate, Timestamp: 1700000000000,
			Memory: &protocol.MemoryActionMemory{ID: ptr("amem_bobs"), UserRating: ptr(int32(5))}}, userMeta)
		m.applied("SYSTEM", seq)
		if n := m.queryInt(`SELECT count(*) FROM alicia_memory WHERE id = 'amem_bobs' AND user_rating IS NULL AND created_by = 'bob'`); n != 1 {
			t.Errorf("user-1 rated bob's memory (or its created_by is not bob)")
		}
		if got := m.queryInt(`SELECT user_rating FROM alicia_memory WHERE id = 'amem_rated'`); got != 2 {
			t.Errorf("user_rating = %d after the second rating, want 2", got)
		}
	})
}

// TestMemorySourceInfo: an extracted memory keeps its sourceInfo and is
// created by "extraction"; one the person made is created by them.
func TestMemorySourceInfo(t *testing.T) {
	m := newMemStack(t)
	info := protocol.MemoryActionMemorySourceInfo{"conversationId": memCID, "messageIds": []any{m.userMessage, "am_answer"}, "model": "qwen", "extractedAt": 1700000000000}
	seq := m.system(&protocol.MemoryAction{ID: "ama_s_x", Action: protocol.MemoryActionActionCreate, Timestamp: 1700000000000,
		Memory: &protocol.MemoryActionMemory{ID: ptr("amem_x"), Content: "Drinks green tea", Embedding: embeddingOf(3), EmbeddingModel: ptr("bge-m3"),
			Source: ptr("extraction"), SourceMessageID: ptr(m.userMessage), SourceInfo: info}}, userMeta)
	m.applied("SYSTEM", seq)
	var createdBy, got string
	if err := m.pool.QueryRow(context.Background(), `SELECT created_by, source_info::text FROM alicia_memory WHERE id = 'amem_x'`).Scan(&createdBy, &got); err != nil {
		t.Fatal(err)
	}
	want := `{"model": "qwen", "messageIds": ["am_u_mem", "am_answer"], "extractedAt": 1700000000000, "conversationId": "ac_mem"}`
	if createdBy != "extraction" || got != want {
		t.Errorf("created_by %q source_info %s, want extraction and %s", createdBy, got, want)
	}

	m.fromClient(protocol.MemoryActionActionCreate, "amem_mine", "Has a bike")
	if n := m.queryInt(`SELECT count(*) FROM alicia_memory WHERE id = 'amem_mine' AND created_by = 'user-1' AND source_info = '{}'`); n != 1 {
		t.Errorf("a person's memory is not created by them: %s", m.row("amem_mine"))
	}
}

// TestMemoryUseQueryPrompt: a MemoryTrace's queryPrompt and queryPromptMeta
// reach alicia_memory_used.
func TestMemoryUseQueryPrompt(t *testing.T) {
	m := newMemStack(t)
	m.fromClient(protocol.MemoryActionActionCreate, "amem_q", "Likes green tea")
	seq := m.server(memCID, &protocol.MemoryTrace{ID: "amu_q", MessageID: m.userMessage, ConversationID: memCID, MemoryID: "amem_q", Content: "Likes green tea",
		Relevance: 0.8, QueryPrompt: ptr("what tea do I like"),
		QueryPromptMeta: protocol.MemoryTraceQueryPromptMeta{"embeddingModel": "bge-m3", "candidates": 3, "threshold": 0.3, "limit": 5, "prefetched": true, "searchMs": 4}}, nil)
	m.history(memCID, seq)
	var q, meta string
	if err := m.pool.QueryRow(context.Background(), `SELECT query_prompt, query_prompt_meta::text FROM alicia_memory_used WHERE id = 'amu_q'`).Scan(&q, &meta); err != nil {
		t.Fatal(err)
	}
	want := `{"limit": 5, "searchMs": 4, "threshold": 0.3, "candidates": 3, "prefetched": true, "embeddingModel": "bge-m3"}`
	if q != "what tea do I like" || meta != want {
		t.Errorf("query_prompt %q meta %s, want %s", q, meta, want)
	}
}

// TestCommentaryCreatedBy: a client's Commentary is stored with created_by
// the acting user; one on the conversation has no message.
func TestCommentaryCreatedBy(t *testing.T) {
	m := newMemStack(t)
	m.client(memCID, 2, &protocol.Commentary{ID: "aucc_msg", ConversationID: memCID, MessageID: m.userMessage, Content: "Remember this one"}, userMeta)
	seq := m.client(memCID, 3, &protocol.Commentary{ID: "aucc_conv", ConversationID: memCID, MessageID: m.userMessage, Content: "A good talk",
		CommentaryType: ptr("conversation")}, userMeta)
	m.history(memCID, seq)
	if n := m.queryInt(`SELECT count(*) FROM alicia_user_conversation_commentaries WHERE id = 'aucc_msg' AND created_by = 'user-1' AND message_id = $1 AND content = 'Remember this one'`, m.userMessage); n != 1 {
		t.Error("the message's commentary is not stored with its author")
	}
	if n := m.queryInt(`SELECT count(*) FROM alicia_user_conversation_commentaries WHERE id = 'aucc_conv' AND created_by = 'user-1' AND message_id IS NULL AND commentary_type = 'conversation'`); n != 1 {
		t.Error("the conversation's commentary is not stored without a message")
	}
}
