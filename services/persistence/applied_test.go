package persistence_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
)

func waitApplied(t *testing.T, s *stack, stream string, seq uint64) (rpc.AppliedResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var resp rpc.AppliedResponse
	err := rpc.Call(ctx, s.nc, rpc.AppliedSubject, rpc.AppliedRequest{Stream: stream, Sequence: seq}, &resp)
	return resp, err
}

// TestAppliedReadYourWrites: once persistence.applied answers, the rows of
// everything published up to that sequence are there — with two shards,
// every shard has applied it.
func TestAppliedReadYourWrites(t *testing.T) {
	s := newStack(t)
	s.cfg.Shards = 2
	s.start()
	s.applied(bus.StreamSystem, 0) // the service is up

	var last uint64
	for i := range 200 {
		cid := fmt.Sprintf("ac_ryw%02d", i%50)
		last = s.client(cid, int32(i/50+1), &protocol.UserMessage{ID: fmt.Sprintf("am_ryw%03d", i), ConversationID: cid, Content: "hi"}, nil)
	}
	resp, err := waitApplied(t, s, bus.StreamConversations, last)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Applied < last {
		t.Fatalf("applied = %d, want ≥ %d", resp.Applied, last)
	}
	if n := s.queryInt(`SELECT count(*) FROM alicia_messages`); n != 200 {
		t.Fatalf("%d messages after applied answered, want 200", n)
	}

	t.Run("SYSTEM waits for a sequence published after the request", func(t *testing.T) {
		info, err := s.js.Stream(context.Background(), bus.StreamSystem)
		if err != nil {
			t.Fatal(err)
		}
		next := info.CachedInfo().State.LastSeq + 1
		done := make(chan error, 1)
		var got rpc.AppliedResponse
		go func() {
			var err error
			got, err = waitApplied(t, s, bus.StreamSystem, next)
			done <- err
		}()
		seq := s.system(registration("builtin", "calculator"), nil)
		if seq != next {
			t.Fatalf("published at %d, waited for %d", seq, next)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got.Applied < next {
			t.Fatalf("applied = %d, want ≥ %d", got.Applied, next)
		}
		if n := s.queryInt(`SELECT count(*) FROM alicia_tools WHERE name = 'calculator'`); n != 1 {
			t.Fatal("the tool is not there once applied answered")
		}
	})
}

func TestAppliedErrors(t *testing.T) {
	s := newStack(t)
	s.cfg.HistoryWait = 300 * time.Millisecond
	s.start()
	s.applied(bus.StreamConversations, 0)

	cases := []struct {
		name, stream string
		seq          uint64
		code         string
		atLeast      time.Duration
	}{
		{"unknown stream", "DEADLETTER", 1, rpc.CodeBadRequest, 0},
		{"empty stream", "", 1, rpc.CodeBadRequest, 0},
		{"CONVERSATIONS not applied in time", bus.StreamConversations, 1000, rpc.CodeTimeout, 300 * time.Millisecond},
		{"SYSTEM not applied in time", bus.StreamSystem, 1000, rpc.CodeTimeout, 300 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t0 := time.Now()
			_, err := waitApplied(t, s, c.stream, c.seq)
			took := time.Since(t0)
			if !rpc.IsCode(err, c.code) {
				t.Fatalf("err = %v, want code %s", err, c.code)
			}
			if took < c.atLeast || took > c.atLeast+2*time.Second {
				t.Fatalf("answered after %s, want about %s", took, c.atLeast)
			}
		})
	}
	t.Run("history.get times out the same way", func(t *testing.T) {
		_, err := rpc.History(context.Background(), s.nc, rpc.HistoryRequest{ConversationID: "ac_x", MinSequence: 1000})
		if !rpc.IsCode(err, rpc.CodeTimeout) {
			t.Fatalf("err = %v, want 504", err)
		}
	})
	t.Run("history.get rejects a bad conversation id", func(t *testing.T) {
		_, err := rpc.History(context.Background(), s.nc, rpc.HistoryRequest{ConversationID: "a.b"})
		if !rpc.IsCode(err, rpc.CodeBadRequest) {
			t.Fatalf("err = %v, want 400", err)
		}
	})
	t.Run("history.get of an unknown conversation is empty", func(t *testing.T) {
		h, err := rpc.History(context.Background(), s.nc, rpc.HistoryRequest{ConversationID: "ac_none"})
		if err != nil || len(h.Messages) != 0 {
			t.Fatalf("history = %+v, %v", h, err)
		}
	})
}

// TestAppliedWaitBlocksNoOtherRequest: a request waiting for a sequence far
// ahead does not hold up the requests behind it.
func TestAppliedWaitBlocksNoOtherRequest(t *testing.T) {
	s := newStack(t)
	s.cfg.HistoryWait = 1500 * time.Millisecond
	s.start()
	s.applied(bus.StreamConversations, 0)

	// The slow request is published (and flushed) before the fast one on
	// the same connection, so the service receives it first.
	inbox := nats.NewInbox()
	slow, err := s.nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := msgpack.Marshal(rpc.AppliedRequest{Stream: bus.StreamConversations, Sequence: 1 << 40})
	if err := s.nc.PublishRequest(rpc.AppliedSubject, inbox, req); err != nil {
		t.Fatal(err)
	}
	if err := s.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	seq := s.client("ac_fast", 1, &protocol.UserMessage{ID: "am_fast", ConversationID: "ac_fast", Content: "hi"}, nil)
	if _, err := waitApplied(t, s, bus.StreamConversations, seq); err != nil {
		t.Fatal(err)
	}
	if h := s.history("ac_fast", seq); len(h.Messages) != 1 {
		t.Fatalf("history = %+v", h.Messages)
	}
	if took := time.Since(t0); took > 700*time.Millisecond {
		t.Fatalf("the fast requests took %s behind a waiting one", took)
	}
	m, err := slow.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if code := m.Header.Get("Nats-Service-Error-Code"); code != rpc.CodeTimeout {
		t.Fatalf("the waiting request got %q, want 504", code)
	}
}
