package memory_test

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
)

func TestMemoryAction(t *testing.T) {
	s := newStack(t, stackOptions{noLLM: true})
	resp, err := s.act("alice", protocol.MemoryActionActionCreate, &protocol.MemoryActionMemory{
		Content: "The user likes green tea.", Tags: []string{"drinks"}, Importance: protocol.Ptr(0.7)})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.MemoryID
	if !strings.HasPrefix(id, "amem_") || resp.Memory.ID != id || resp.Memory.Content != "The user likes green tea." ||
		resp.Memory.Importance != 0.7 || !slices.Equal(resp.Memory.Tags, []string{"drinks"}) || resp.Memory.CreatedAt == 0 {
		t.Fatalf("create reply = %+v", resp)
	}
	r, ok := s.row(id)
	if !ok || r.UserID != "alice" || !r.HasEmbedding {
		t.Fatalf("created row = %+v (found %v), want alice's with an embedding", r, ok)
	}
	if sim := s.similarity(id, "The user likes green tea."); math.Abs(sim-1) > 1e-4 {
		t.Fatalf("stored embedding similarity to its content = %.4f, want 1", sim)
	}
	if r.Source != "api" || r.Model != "fake-embedding" {
		t.Errorf("source %q, model %q; want api, fake-embedding", r.Source, r.Model)
	}

	t.Run("update re-embeds and keeps omitted tags", func(t *testing.T) {
		resp, err := s.act("alice", protocol.MemoryActionActionUpdate, &protocol.MemoryActionMemory{ID: &id, Content: "The user likes jasmine tea."})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Memory.Content != "The user likes jasmine tea." || !slices.Equal(resp.Memory.Tags, []string{"drinks"}) || resp.Memory.Importance != 0.7 {
			t.Fatalf("update reply = %+v", resp.Memory)
		}
		if sim := s.similarity(id, "The user likes jasmine tea."); math.Abs(sim-1) > 1e-4 {
			t.Fatalf("embedding not of the new content (similarity %.4f)", sim)
		}
	})
	t.Run("pin", func(t *testing.T) {
		resp, err := s.act("alice", protocol.MemoryActionActionPin, &protocol.MemoryActionMemory{ID: &id})
		if err != nil || !resp.Memory.Pinned {
			t.Fatalf("pin: %+v, %v", resp.Memory, err)
		}
	})
	t.Run("archive", func(t *testing.T) {
		resp, err := s.act("alice", protocol.MemoryActionActionArchive, &protocol.MemoryActionMemory{ID: &id})
		if err != nil || !resp.Memory.Archived {
			t.Fatalf("archive: %+v, %v", resp.Memory, err)
		}
	})
	t.Run("delete", func(t *testing.T) {
		if _, err := s.act("alice", protocol.MemoryActionActionDelete, &protocol.MemoryActionMemory{ID: &id}); err != nil {
			t.Fatal(err)
		}
		if r, _ := s.row(id); !r.Deleted {
			t.Fatal("memory not deleted")
		}
		// Deleted: gone for every further action.
		if _, err := s.act("alice", protocol.MemoryActionActionPin, &protocol.MemoryActionMemory{ID: &id}); !rpc.IsCode(err, rpc.CodeNotFound) {
			t.Fatalf("pin after delete: %v, want 404", err)
		}
	})

	bobs := s.create("bob", "Bob's secret", nil, 0.5)
	alices := s.create("alice", "Alice's fact", nil, 0.5)
	missing := "amem_doesnotexist"
	for _, c := range []struct {
		name   string
		action protocol.MemoryActionAction
		m      *protocol.MemoryActionMemory
		code   string
	}{
		{"update missing", protocol.MemoryActionActionUpdate, &protocol.MemoryActionMemory{ID: &missing, Content: "x"}, rpc.CodeNotFound},
		{"delete missing", protocol.MemoryActionActionDelete, &protocol.MemoryActionMemory{ID: &missing}, rpc.CodeNotFound},
		{"update another user's", protocol.MemoryActionActionUpdate, &protocol.MemoryActionMemory{ID: &bobs, Content: "mine now"}, rpc.CodeNotFound},
		{"delete another user's", protocol.MemoryActionActionDelete, &protocol.MemoryActionMemory{ID: &bobs}, rpc.CodeNotFound},
		{"pin another user's", protocol.MemoryActionActionPin, &protocol.MemoryActionMemory{ID: &bobs}, rpc.CodeNotFound},
		{"archive another user's", protocol.MemoryActionActionArchive, &protocol.MemoryActionMemory{ID: &bobs}, rpc.CodeNotFound},
		{"create with another user's id", protocol.MemoryActionActionCreate, &protocol.MemoryActionMemory{ID: &bobs, Content: "x"}, rpc.CodeBadRequest},
		{"create over an existing memory", protocol.MemoryActionActionCreate, &protocol.MemoryActionMemory{ID: &alices, Content: "something else"}, rpc.CodeBadRequest},
		{"create without content", protocol.MemoryActionActionCreate, &protocol.MemoryActionMemory{Content: " "}, rpc.CodeBadRequest},
		{"create without memory", protocol.MemoryActionActionCreate, nil, rpc.CodeBadRequest},
		{"importance out of range", protocol.MemoryActionActionCreate, &protocol.MemoryActionMemory{Content: "x", Importance: protocol.Ptr(1.5)}, rpc.CodeBadRequest},
		{"content too long", protocol.MemoryActionActionCreate, &protocol.MemoryActionMemory{Content: strings.Repeat("a", 4001)}, rpc.CodeBadRequest},
		{"unknown action", "forget", &protocol.MemoryActionMemory{ID: &bobs}, rpc.CodeBadRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.act("alice", c.action, c.m)
			if !rpc.IsCode(err, c.code) {
				t.Fatalf("err = %v, want code %s", err, c.code)
			}
		})
	}
	if r, _ := s.row(bobs); r.Content != "Bob's secret" || r.Deleted || r.Pinned || r.Archived || r.UserID != "bob" {
		t.Fatalf("bob's memory changed by alice's requests: %+v", r)
	}
	if n := s.count(`SELECT count(*) FROM alicia_memory`); n != 3 {
		t.Fatalf("%d memories, want 3 (rejected requests store nothing)", n)
	}
	if r, _ := s.row(alices); r.Content != "Alice's fact" {
		t.Fatalf("create over an existing memory changed it: %+v", r)
	}

	t.Run("a retried create names the same memory", func(t *testing.T) {
		act := protocol.MemoryAction{ID: "amact_retry", Action: protocol.MemoryActionActionCreate, Timestamp: time.Now().UnixMilli(),
			Memory: &protocol.MemoryActionMemory{Content: "The user runs on Sundays."}}
		var got []string
		for range 2 {
			resp, err := rpc.MemoryAct(s.ctx(), s.nc, rpc.MemoryActionRequest{UserID: "alice", Action: act})
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, resp.MemoryID)
		}
		if got[0] != got[1] || s.count(`SELECT count(*) FROM alicia_memory WHERE content = 'The user runs on Sundays.'`) != 1 {
			t.Fatalf("retried create gave %v", got)
		}
	})
}

func TestMemoryActionWaitsForPersistence(t *testing.T) {
	s := newStack(t, stackOptions{noLLM: true})
	// The reply comes after persistence applied the action: the row is
	// there at once, no polling needed.
	for i := range 5 {
		id := s.create("alice", "fact number "+string(rune('a'+i)), nil, 0.5)
		if _, ok := s.row(id); !ok {
			t.Fatalf("memory %s not stored when memory.action replied", id)
		}
	}
}
