package memory_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
)

func rating(r int32) *protocol.MemoryActionMemory {
	return &protocol.MemoryActionMemory{UserRating: &r}
}

// TestMemoryRating: memory.action rate sets the owner's rating and nothing
// else; a rating outside 1..5, a missing one and another person's memory
// are refused; a client's rate is confirmed, and a bad one answered with
// an ErrorMessage.
func TestMemoryRating(t *testing.T) {
	s := newStack(t, stackOptions{noLLM: true})
	mine := s.create("alice", "The user likes jazz.", []string{"music"}, 0.5)
	bobs := s.create("bob", "Bob keeps bees.", nil, 0.5)
	userRating := func(id string) int {
		return s.count(`SELECT COALESCE(user_rating, 0) FROM alicia_memory WHERE id = $1`, id)
	}

	m := rating(4)
	m.ID = &mine
	resp, err := s.act("alice", protocol.MemoryActionActionRate, m)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Memory.UserRating == nil || *resp.Memory.UserRating != 4 || resp.Memory.CreatedBy != "alice" {
		t.Fatalf("answered memory = %+v, want rating 4 created by alice", resp.Memory)
	}
	if r, _ := s.row(mine); userRating(mine) != 4 || r.Content != "The user likes jazz." || !r.HasEmbedding || r.Importance != 0.5 {
		t.Fatalf("row after rating = %+v (rating %d)", r, userRating(mine))
	}

	for _, c := range []struct {
		name string
		id   string
		m    *protocol.MemoryActionMemory
		code string
	}{
		{"rating 0", mine, rating(0), rpc.CodeBadRequest},
		{"rating 6", mine, rating(6), rpc.CodeBadRequest},
		{"no rating", mine, &protocol.MemoryActionMemory{}, rpc.CodeBadRequest},
		{"another person's memory", bobs, rating(5), rpc.CodeNotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.m.ID = &c.id
			if _, err := s.act("alice", protocol.MemoryActionActionRate, c.m); !rpc.IsCode(err, c.code) {
				t.Fatalf("err = %v, want code %s", err, c.code)
			}
		})
	}
	if userRating(mine) != 4 || userRating(bobs) != 0 {
		t.Fatalf("ratings after refused rates: mine %d bob's %d", userRating(mine), userRating(bobs))
	}

	t.Run("from a client", func(t *testing.T) {
		cid := "ac_rating"
		events := s.listen(cid)
		s.client(cid, "alice", 1, &protocol.MemoryAction{ID: "amact_rate_c", Action: protocol.MemoryActionActionRate, Timestamp: 1,
			Memory: &protocol.MemoryActionMemory{ID: &mine, UserRating: protocol.Ptr(int32(2))}})
		if conf := next[*protocol.MemoryConfirmation](t, events); !conf.Success || conf.Action != protocol.MemoryConfirmationActionRate || conf.MemoryID != mine {
			t.Fatalf("confirmation = %+v", conf)
		}
		if userRating(mine) != 2 {
			t.Fatalf("rating = %d after the client's rate, want 2", userRating(mine))
		}
		seq := s.client(cid, "alice", 2, &protocol.MemoryAction{ID: "amact_rate_none", Action: protocol.MemoryActionActionRate, Timestamp: 1,
			Memory: &protocol.MemoryActionMemory{ID: &mine}})
		s.refuse(seq) // persistence stores no rate without a rating
		if e := next[*protocol.ErrorMessage](t, events); e.Code != protocol.CodeInvalidBody || e.OriginatingID == nil || *e.OriginatingID != "amact_rate_none" {
			t.Fatalf("error = %+v", e)
		}
		if conf := next[*protocol.MemoryConfirmation](t, events); conf.Success {
			t.Fatalf("confirmation = %+v, want a failure", conf)
		}
		seq = s.client(cid, "alice", 3, &protocol.MemoryAction{ID: "amact_rate_bob", Action: protocol.MemoryActionActionRate, Timestamp: 1,
			Memory: &protocol.MemoryActionMemory{ID: &bobs, UserRating: protocol.Ptr(int32(1))}})
		s.refuse(seq) // another user's memory
		if e := next[*protocol.ErrorMessage](t, events); e.Code != protocol.CodeNotFound {
			t.Fatalf("error = %+v", e)
		}
		if conf := next[*protocol.MemoryConfirmation](t, events); conf.Success {
			t.Fatalf("confirmation = %+v, want a failure", conf)
		}
		if userRating(bobs) != 0 {
			t.Fatal("alice rated bob's memory")
		}
	})
}

// TestSearchRanksByRating: among equally near memories a higher rating
// comes first; a rating only nudges, so a much nearer memory rated 1 still
// beats a farther one rated 5.
func TestSearchRanksByRating(t *testing.T) {
	s := newStack(t, stackOptions{noLLM: true})
	// The fake embedding is a bag of words: the same words, the same vector.
	low := s.create("alice", "The user drinks green tea.", nil, 0.5)
	plain := s.create("alice", "Green tea the user drinks.", nil, 0.5)
	high := s.create("alice", "Tea the user drinks green.", nil, 0.5)
	rate := func(id string, r int32) {
		t.Helper()
		m := rating(r)
		m.ID = &id
		if _, err := s.act("alice", protocol.MemoryActionActionRate, m); err != nil {
			t.Fatal(err)
		}
	}
	rate(low, 1)
	rate(high, 5)
	got := s.search(rpc.MemorySearchRequest{UserID: "alice", Query: "the user drinks green tea", TopK: 3}).Memories
	if len(got) != 3 || got[0].ID != high || got[1].ID != plain || got[2].ID != low {
		t.Fatalf("order = %v, want rated 5, unrated, rated 1 (%s %s %s)", ids(got), high, plain, low)
	}
	if got[0].Similarity != got[2].Similarity {
		t.Fatalf("similarity changed by the rating: %v vs %v", got[0].Similarity, got[2].Similarity)
	}

	t.Run("lightly", func(t *testing.T) {
		far := s.create("alice", "The user drinks green tea with mint leaves.", nil, 0.5)
		rate(far, 5)
		got := s.search(rpc.MemorySearchRequest{UserID: "alice", Query: "the user drinks green tea", TopK: 4}).Memories
		if len(got) != 4 || got[3].ID != far {
			t.Fatalf("order = %v: the farther memory rated 5 (%s) should still come last", ids(got), far)
		}
	})
}

// TestExtractionSourceInfo: an extracted memory says where it came from.
func TestExtractionSourceInfo(t *testing.T) {
	s := newStack(t, stackOptions{})
	cid := "ac_sourceinfo"
	s.ai.On(isExtraction, answerJSON(`{"memories": [{"content": "The user is learning Italian.", "tags": ["languages"], "importance": 0.6}]}`))
	s.client(cid, "alice", 1, &protocol.UserMessage{ID: "am_si_u", ConversationID: cid, Content: "I started Italian lessons."})
	seq := s.server(cid, &protocol.AssistantMessage{ID: "am_si_a", PreviousID: protocol.Ptr("am_si_u"), ConversationID: cid, Content: "Bravo!"})
	s.extracted(seq)
	var createdBy, raw string
	if err := s.pool.QueryRow(context.Background(), `SELECT created_by, source_info::text FROM alicia_memory WHERE user_id = 'alice'`).Scan(&createdBy, &raw); err != nil {
		t.Fatalf("no memory extracted: %v", err)
	}
	var info struct {
		ConversationID string   `json:"conversationId"`
		MessageIDs     []string `json:"messageIds"`
		Model          string   `json:"model"`
		PromptVersion  string   `json:"promptVersion"`
		ExtractedAt    int64    `json:"extractedAt"`
	}
	if err := json.Unmarshal([]byte(raw), &info); err != nil {
		t.Fatal(err)
	}
	if createdBy != "extraction" || info.ConversationID != cid || len(info.MessageIDs) != 2 || info.MessageIDs[0] != "am_si_u" ||
		info.MessageIDs[1] != "am_si_a" || info.Model != "fake-chat" || info.ExtractedAt == 0 || info.PromptVersion == "" {
		t.Fatalf("created_by %q source_info %s", createdBy, raw)
	}
}
