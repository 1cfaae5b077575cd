package memory_test

import (
	"math"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
)

func TestClientMemoryAction(t *testing.T) {
	s := newStack(t, stackOptions{noLLM: true})
	cid := "ac_clientactions"
	events := s.listen(cid)
	now := time.Now().UnixMilli()

	t.Run("create is embedded and confirmed", func(t *testing.T) {
		// No memory id: persistence and the memory service both use the action's.
		s.client(cid, "alice", 1, &protocol.MemoryAction{ID: "amem_fromclient", Action: protocol.MemoryActionActionCreate, Timestamp: now,
			Memory: &protocol.MemoryActionMemory{Content: "The user plays the cello.", Tags: []string{"music"}}})
		conf := next[*protocol.MemoryConfirmation](t, events)
		if !conf.Success || conf.MemoryID != "amem_fromclient" || conf.Action != protocol.MemoryConfirmationActionCreate {
			t.Fatalf("confirmation = %+v", conf)
		}
		// Confirmed after persistence stored the embedding: no polling.
		r, ok := s.row("amem_fromclient")
		if !ok || r.UserID != "alice" || !r.HasEmbedding || r.Content != "The user plays the cello." {
			t.Fatalf("row = %+v (found %v)", r, ok)
		}
		if sim := s.similarity("amem_fromclient", "The user plays the cello."); math.Abs(sim-1) > 1e-4 {
			t.Fatalf("embedding similarity to the content = %.4f", sim)
		}
	})
	t.Run("update is re-embedded", func(t *testing.T) {
		id := "amem_fromclient"
		s.client(cid, "alice", 2, &protocol.MemoryAction{ID: "amact_upd", Action: protocol.MemoryActionActionUpdate, Timestamp: now,
			Memory: &protocol.MemoryActionMemory{ID: &id, Content: "The user plays the viola.", Tags: []string{"music"}}})
		if conf := next[*protocol.MemoryConfirmation](t, events); !conf.Success || conf.MemoryID != id || conf.Action != protocol.MemoryConfirmationActionUpdate {
			t.Fatalf("confirmation = %+v", conf)
		}
		if sim := s.similarity(id, "The user plays the viola."); math.Abs(sim-1) > 1e-4 {
			t.Fatalf("embedding similarity to the new content = %.4f", sim)
		}
	})
	t.Run("pin is confirmed", func(t *testing.T) {
		id := "amem_fromclient"
		s.client(cid, "alice", 3, &protocol.MemoryAction{ID: "amact_pin", Action: protocol.MemoryActionActionPin, Timestamp: now,
			Memory: &protocol.MemoryActionMemory{ID: &id}})
		if conf := next[*protocol.MemoryConfirmation](t, events); !conf.Success || conf.Action != protocol.MemoryConfirmationActionPin {
			t.Fatalf("confirmation = %+v", conf)
		}
		if r, _ := s.row(id); !r.Pinned {
			t.Fatal("not pinned")
		}
	})

	bobs := s.create("bob", "Bob keeps bees.", nil, 0.5)
	for i, c := range []struct {
		name string
		act  *protocol.MemoryAction
		id   string
	}{
		{"missing memory", &protocol.MemoryAction{ID: "amact_missing", Action: protocol.MemoryActionActionArchive, Timestamp: now,
			Memory: &protocol.MemoryActionMemory{ID: protocol.Ptr("amem_nothere")}}, "amem_nothere"},
		{"another user's memory", &protocol.MemoryAction{ID: "amact_steal", Action: protocol.MemoryActionActionUpdate, Timestamp: now,
			Memory: &protocol.MemoryActionMemory{ID: &bobs, Content: "Bob keeps wasps."}}, bobs},
	} {
		t.Run(c.name, func(t *testing.T) {
			seq := s.client(cid, "alice", int32(10+i), c.act)
			if c.id == bobs {
				// persistence refuses to store an action on another user's memory
				s.refuse(seq)
			}
			e := next[*protocol.ErrorMessage](t, events)
			if e.Code != protocol.CodeNotFound || !e.Recoverable || e.OriginatingID == nil || *e.OriginatingID != c.act.ID {
				t.Fatalf("error = %+v", e)
			}
			if conf := next[*protocol.MemoryConfirmation](t, events); conf.Success || conf.MemoryID != c.id {
				t.Fatalf("confirmation = %+v, want a failure for %s", conf, c.id)
			}
		})
	}
	if r, _ := s.row(bobs); r.Content != "Bob keeps bees." || !r.HasEmbedding {
		t.Fatalf("bob's memory after alice's update = %+v", r)
	}
}

func TestClientMemoryActionBackendDown(t *testing.T) {
	s := newStack(t, stackOptions{noLLM: true})
	cid := "ac_clientdown"
	events := s.listen(cid)
	s.ai.SetFault(fakeopenai.Fault{Down: true})
	s.client(cid, "alice", 1, &protocol.MemoryAction{ID: "amem_down", Action: protocol.MemoryActionActionCreate, Timestamp: time.Now().UnixMilli(),
		Memory: &protocol.MemoryActionMemory{Content: "The user lives in Lisbon."}})
	e := next[*protocol.ErrorMessage](t, events)
	if e.Code != protocol.CodeBackendUnavailable || !e.Recoverable {
		t.Fatalf("error = %+v, want 503 recoverable", e)
	}
	if conf := next[*protocol.MemoryConfirmation](t, events); conf.Success || conf.MemoryID != "amem_down" {
		t.Fatalf("confirmation = %+v", conf)
	}
	// The client's memory is stored as sent, without an embedding; an update
	// once the backend is back embeds it.
	if r, ok := s.row("amem_down"); !ok || r.HasEmbedding {
		t.Fatalf("row = %+v (found %v)", r, ok)
	}
	s.ai.SetFault(fakeopenai.Fault{})
	id := "amem_down"
	s.client(cid, "alice", 2, &protocol.MemoryAction{ID: "amact_retry", Action: protocol.MemoryActionActionUpdate, Timestamp: time.Now().UnixMilli(),
		Memory: &protocol.MemoryActionMemory{ID: &id, Content: "The user lives in Lisbon."}})
	if conf := next[*protocol.MemoryConfirmation](t, events); !conf.Success {
		t.Fatalf("confirmation after recovery = %+v", conf)
	}
	if r, _ := s.row(id); !r.HasEmbedding {
		t.Fatal("no embedding after recovery")
	}
}
