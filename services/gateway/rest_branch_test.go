package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
)

type snapshot struct {
	conversation
	StreamSeq uint64 `json:"streamSeq"`
	Messages  []struct {
		message
		Sentences []struct {
			Sequence int    `json:"sequence"`
			Text     string `json:"text"`
		} `json:"sentences"`
	} `json:"messages"`
}

func (s snapshot) ids() string {
	var ids []string
	for _, m := range s.Messages {
		ids = append(ids, m.ID)
	}
	return strings.Join(ids, ",")
}

// TestBranchThroughAMessage: ?through= shows the branch that goes through
// a message (the web client's version navigator): from the root to it,
// then along the newest reply to a leaf; only the owner's, only a message
// of that conversation.
func TestBranchThroughAMessage(t *testing.T) {
	s := newStack(t)
	var c conversation
	s.call(t, aliceKey, "POST", "/v1/conversations", nil).want(http.StatusCreated, &c)
	a1 := s.turn(t, "alice", c.ID, "am_b1", "", "first")
	a2 := s.turn(t, "alice", c.ID, "am_b2", a1, "second")
	s.publish(t, "alice",
		protocol.New(c.ID, &protocol.StartAnswer{ID: "am_b2_alt", PreviousID: "am_b2", ConversationID: c.ID}),
		protocol.New(c.ID, &protocol.AssistantSentence{PreviousID: "am_b2_alt", ConversationID: c.ID, Sequence: 1, Text: "Other.", IsFinal: protocol.Ptr(true)}),
	)
	var got snapshot
	s.call(t, aliceKey, "GET", "/v1/conversations/"+c.ID+"?through="+a2, nil).want(http.StatusOK, &got)
	if want := "am_b1," + a1 + ",am_b2," + a2; got.ids() != want {
		t.Fatalf("through %s: %s, want %s", a2, got.ids(), want)
	}
	if got.Messages[3].Content != "Four." || len(got.Messages[3].ToolUses) != 1 || got.Messages[3].SiblingCount != 2 {
		t.Fatalf("the older version %+v", got.Messages[3])
	}
	// A finished tool use says how long it ran.
	if d := got.Messages[3].ToolUses[0].DurationMs; d == nil || *d < 0 {
		t.Fatalf("tool use duration %v", d)
	}
	// From the root on, the newest reply at each step.
	s.call(t, aliceKey, "GET", "/v1/conversations/"+c.ID+"?through=am_b1", nil).want(http.StatusOK, &got)
	if want := "am_b1," + a1 + ",am_b2,am_b2_alt"; got.ids() != want {
		t.Fatalf("through the root: %s, want %s", got.ids(), want)
	}
	var other conversation
	s.call(t, aliceKey, "POST", "/v1/conversations", nil).want(http.StatusCreated, &other)
	s.turn(t, "alice", other.ID, "am_o1", "", "elsewhere")
	for _, tc := range []struct {
		name, key, query string
		status           int
	}{
		{"a message of another conversation", aliceKey, "?through=am_o1", http.StatusNotFound},
		{"an unknown message", aliceKey, "?through=am_nope", http.StatusNotFound},
		{"not an id", aliceKey, "?through=a.b", http.StatusBadRequest},
		{"another user's conversation", bobKey, "?through=" + a2, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.call(t, tc.key, "GET", "/v1/conversations/"+c.ID+tc.query, nil).wantError(tc.status)
		})
	}
}

// TestSnapshotResumePoint: a conversation comes with the stream position
// read before its messages, and an answer still streaming with its stored
// sentences, so a client resuming after that position continues it.
func TestSnapshotResumePoint(t *testing.T) {
	s := newStack(t)
	var c conversation
	s.call(t, aliceKey, "POST", "/v1/conversations", nil).want(http.StatusCreated, &c)
	a1 := s.turn(t, "alice", c.ID, "am_r1", "", "hello")
	s.publish(t, "alice",
		protocol.New(c.ID, &protocol.UserMessage{ID: "am_r2", PreviousID: &a1, ConversationID: c.ID, Content: "more"}),
		protocol.New(c.ID, &protocol.StartAnswer{ID: "am_r2_ans", PreviousID: "am_r2", ConversationID: c.ID}),
		protocol.New(c.ID, &protocol.AssistantSentence{PreviousID: "am_r2_ans", ConversationID: c.ID, Sequence: 1, Text: "One."}),
		protocol.New(c.ID, &protocol.AssistantSentence{PreviousID: "am_r2_ans", ConversationID: c.ID, Sequence: 2, Text: "Two."}),
	)
	ctx := context.Background()
	js, err := jetstream.New(s.nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, bus.StreamConversations)
	if err != nil {
		t.Fatal(err)
	}
	last := st.CachedInfo().State.LastSeq
	var got snapshot
	s.call(t, aliceKey, "GET", "/v1/conversations/"+c.ID, nil).want(http.StatusOK, &got)
	if got.StreamSeq < last {
		t.Fatalf("streamSeq %d, before the last stored envelope %d", got.StreamSeq, last)
	}
	streaming := got.Messages[len(got.Messages)-1]
	if streaming.ID != "am_r2_ans" || streaming.Status != "streaming" || len(streaming.Sentences) != 2 ||
		streaming.Sentences[0].Text != "One." || streaming.Sentences[1].Sequence != 2 {
		t.Fatalf("streaming answer %+v", streaming)
	}
	if done := got.Messages[1]; done.ID != a1 || done.Sentences != nil {
		t.Fatalf("a completed answer carries sentences: %+v", done)
	}
}

// TestSnapshotHasWhatTheStreamHeld: envelopes already in the stream when a
// conversation is read are in the answer, even when persistence has not
// applied them yet (the read waits for it, up to its position).
func TestSnapshotHasWhatTheStreamHeld(t *testing.T) {
	s := newStack(t)
	var c conversation
	s.call(t, aliceKey, "POST", "/v1/conversations", nil).want(http.StatusCreated, &c)
	ctx := context.Background()
	prev := ""
	const n = 200
	for i := range n {
		id := fmt.Sprintf("am_inflight%03d", i)
		var p *string
		if prev != "" {
			p = &prev
		}
		env := protocol.New(c.ID, &protocol.UserMessage{ID: id, PreviousID: p, ConversationID: c.ID, Content: "hi"})
		env.Meta = map[string]any{edge.MetaUserID: "alice"}
		if _, err := s.pub.PublishClient(ctx, env); err != nil {
			t.Fatal(err)
		}
		prev = id
	}
	var got snapshot
	s.call(t, aliceKey, "GET", "/v1/conversations/"+c.ID, nil).want(http.StatusOK, &got)
	if len(got.Messages) != n || got.Messages[n-1].ID != prev {
		t.Fatalf("%d messages (last %q), want the %d already published", len(got.Messages), got.ids()[max(0, len(got.ids())-20):], n)
	}
}
