package gateway_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/gateway"
)

// storedAudio is the audio Postgres holds for a conversation.
func (s *stack) storedAudio(t *testing.T, cid string) int64 {
	t.Helper()
	var n int64
	if err := s.pool.QueryRow(context.Background(),
		`SELECT coalesce(sum(octet_length(audio_data)), 0) FROM alicia_audio WHERE conversation_id = $1`, cid).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// frames reads every frame of w from now on (a Read whose context ends
// closes the connection, so waits are on the channel instead).
func (w *wsClient) frames() <-chan protocol.Envelope {
	ch := make(chan protocol.Envelope, 1024)
	go func() {
		defer close(ch)
		for {
			_, b, err := w.c.Read(context.Background())
			if err != nil {
				return
			}
			if env, err := protocol.Decode(b); err == nil {
				ch <- env
			}
		}
	}()
	return ch
}

// errorWithin returns the first ErrorMessage on frames within d, or nil.
func errorWithin(frames <-chan protocol.Envelope, d time.Duration) *protocol.Envelope {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case env, ok := <-frames:
			if !ok {
				return nil
			}
			if _, isErr := env.Body.(*protocol.ErrorMessage); isErr {
				return &env
			}
		case <-t.C:
			return nil
		}
	}
}

// TestStoredBytesBudget: a user whose conversations hold the stored budget
// (read from Postgres, over every replica) has further audio and messages
// refused with 505 stored_bytes, on a connection that stays open, and a
// voice room with 429; what was accepted is all in Postgres; another user
// is not affected; deleting the conversation frees the budget.
func TestStoredBytesBudget(t *testing.T) {
	const budget = 100 << 10
	s := newStack(t, func(o *stackOptions) {
		o.gateway = func(c *gateway.Config) {
			withLiveKit(c)
			c.Quotas.Budgets.StoredBytes = budget
			c.Quotas.Budgets.UsageRefresh = time.Second
		}
	})
	alice := s.dial(t, aliceKey)
	alice.send("", &protocol.Configuration{})
	cid := *alice.recv().Body.(*protocol.Configuration).ConversationID
	aliceFrames := alice.frames()
	chunk := func(seq int32) *protocol.AudioChunk {
		return &protocol.AudioChunk{ConversationID: cid, Data: make([]byte, 16<<10), Format: "pcm_s16le_16000", Sequence: seq, DurationMs: 500}
	}
	var refused *protocol.Envelope
	accepted := int64(0)
	for seq := int32(1); seq <= 20 && refused == nil; seq++ {
		alice.send(cid, chunk(seq))
		if refused = errorWithin(aliceFrames, 200*time.Millisecond); refused == nil {
			accepted += 16 << 10
		}
	}
	if refused == nil {
		t.Fatal("20 chunks of 16 KiB taken under a 96 KiB stored budget")
	}
	em := refused.Body.(*protocol.ErrorMessage)
	if em.Code != protocol.CodeOverBudget || !strings.Contains(em.Message, "stored_bytes") || !em.Recoverable || refused.Meta[edge.MetaBudget] != edge.BudgetStored {
		t.Fatalf("refusal %+v meta %v: want 505 stored_bytes, recoverable", em, refused.Meta)
	}
	if accepted > budget {
		t.Fatalf("%d bytes of audio accepted over a %d budget", accepted, budget)
	}
	// Everything accepted reaches Postgres: nothing is lost for the budget.
	testkit.Eventually(t, 10*time.Second, func() bool { return s.storedAudio(t, cid) == accepted }, "accepted audio not all stored")
	// The database's count is what the budget reads after a refresh too.
	alice.send(cid, chunk(99))
	if e := errorWithin(aliceFrames, 2*time.Second); e == nil || e.Meta[edge.MetaBudget] != edge.BudgetStored {
		t.Fatalf("audio over the stored budget: %+v", e)
	}
	// Voice stores audio too: no room for a user over the budget.
	if msg := s.call(t, aliceKey, "POST", "/v1/conversations/"+cid+"/token", nil).wantError(http.StatusTooManyRequests); !strings.Contains(msg, "over budget stored_bytes") {
		t.Fatalf("a room token over the stored budget: %q", msg)
	}
	bob := s.dial(t, bobKey)
	bob.send("", &protocol.Configuration{})
	bcid := *bob.recv().Body.(*protocol.Configuration).ConversationID
	bobFrames := bob.frames()
	bob.send(bcid, &protocol.AudioChunk{ConversationID: bcid, Data: make([]byte, 16<<10), Format: "pcm_s16le_16000", Sequence: 1, DurationMs: 500})
	if e := errorWithin(bobFrames, 300*time.Millisecond); e != nil {
		t.Fatalf("another user refused: %+v", e.Body)
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return s.storedAudio(t, bcid) == 16<<10 }, "bob's audio")
	s.call(t, bobKey, "POST", "/v1/conversations/"+bcid+"/token", nil).want(http.StatusOK, nil)

	// Deleting the conversation frees the budget (after a refresh).
	s.call(t, aliceKey, "DELETE", "/v1/conversations/"+cid, nil).want(http.StatusNoContent, nil)
	again := s.dial(t, aliceKey)
	again.send("", &protocol.Configuration{})
	ncid := *again.recv().Body.(*protocol.Configuration).ConversationID
	againFrames := again.frames()
	testkit.Eventually(t, 10*time.Second, func() bool {
		again.send(ncid, &protocol.UserMessage{ID: protocol.NewID("am"), ConversationID: ncid, Content: "hello again"})
		return errorWithin(againFrames, 300*time.Millisecond) == nil
	}, "the budget was not freed by deleting the conversation")
}

// TestConversationsPerHourBudget: beyond its budget a user's new
// conversations are refused over REST (429 naming it, with Retry-After)
// and over the WebSocket (505), both counted together; another user is
// not affected.
func TestConversationsPerHourBudget(t *testing.T) {
	s := newStack(t, func(o *stackOptions) {
		o.gateway = func(c *gateway.Config) {
			c.Quotas.Budgets.ConversationsPerHour = 3
			c.Quotas.Budgets.UsageRefresh = time.Second // reads that see what was created here: counted once
		}
	})
	for range 2 {
		s.call(t, aliceKey, "POST", "/v1/conversations", nil).want(http.StatusCreated, nil)
	}
	ws := s.dial(t, aliceKey)
	ws.send("", &protocol.Configuration{})
	if _, ok := ws.recv().Body.(*protocol.Configuration); !ok {
		t.Fatal("the third conversation refused")
	}
	r := s.call(t, aliceKey, "POST", "/v1/conversations", nil)
	if msg := r.wantError(http.StatusTooManyRequests); !strings.Contains(msg, "over budget conversations_per_hour") {
		t.Fatalf("429 message %q does not name the budget", msg)
	}
	if sec, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || sec < 3000 || sec > 3600 {
		t.Fatalf("Retry-After %q: want the oldest conversation's hour", r.header.Get("Retry-After"))
	}
	ws2 := s.dial(t, aliceKey)
	ws2.send("", &protocol.Configuration{})
	if e := errorWithin(ws2.frames(), 2*time.Second); e == nil || e.Body.(*protocol.ErrorMessage).Code != protocol.CodeOverBudget {
		t.Fatalf("a WebSocket conversation over the budget: %+v", e)
	}
	s.call(t, bobKey, "POST", "/v1/conversations", nil).want(http.StatusCreated, nil)
}

// TestTextBudgetsREST: the REST API takes the same text budgets as the
// WebSocket, and says which one a text is over.
func TestTextBudgetsREST(t *testing.T) {
	s := newStack(t, func(o *stackOptions) {
		o.gateway = func(c *gateway.Config) { c.Quotas.Budgets.MemoryChars = 10 }
	})
	msg := s.call(t, aliceKey, "POST", "/v1/memories", map[string]any{"content": "eleven char"}).wantError(http.StatusBadRequest)
	if !strings.Contains(msg, "over budget memory_chars") || !strings.Contains(msg, "at most 10") {
		t.Fatalf("400 message %q: want the budget named", msg)
	}
}
