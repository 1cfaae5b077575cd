package rpc_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
)

func TestCallRoundTripAndErrors(t *testing.T) {
	srv := natstest.Run(t)
	nc := natstest.Connect(t, srv)
	svc, err := micro.AddService(nc, micro.Config{Name: "test-memory", Version: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	err = svc.AddEndpoint("act", micro.HandlerFunc(func(r micro.Request) {
		var req rpc.MemoryActionRequest
		if !rpc.Decode(r, &req) {
			return
		}
		if req.UserID == "" {
			rpc.Fail(r, rpc.CodeNotFound, "no such memory")
			return
		}
		rpc.Respond(r, rpc.MemoryActionResponse{MemoryID: *req.Action.Memory.ID, Memory: rpc.Memory{Content: req.Action.Memory.Content, Tags: req.Action.Memory.Tags}})
	}), micro.WithEndpointSubject(rpc.MemoryActionSubject))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	id := "amem_1"
	act := protocol.MemoryAction{ID: "x", Action: protocol.MemoryActionActionCreate, Timestamp: 1,
		Memory: &protocol.MemoryActionMemory{ID: &id, Content: "likes tea", Tags: []string{"drinks"}, Embedding: []float64{0.5, 0.25}}}
	resp, err := rpc.MemoryAct(ctx, nc, rpc.MemoryActionRequest{UserID: "u", Action: act})
	if err != nil {
		t.Fatal(err)
	}
	if resp.MemoryID != "amem_1" || resp.Memory.Content != "likes tea" || len(resp.Memory.Tags) != 1 {
		t.Fatalf("reply = %+v", resp)
	}
	_, err = rpc.MemoryAct(ctx, nc, rpc.MemoryActionRequest{Action: act})
	if !rpc.IsCode(err, rpc.CodeNotFound) {
		t.Fatalf("err = %v, want code 404", err)
	}
	_, err = rpc.MemorySearch(ctx, nc, rpc.MemorySearchRequest{UserID: "u", Query: "tea"})
	if err == nil {
		t.Fatal("search without a memory service succeeded")
	}
}

// TestDetachAnswersAfterTheHandlerReturns answers from another goroutine
// (run with -race: answering the micro request itself there is a data race).
func TestDetachAnswersAfterTheHandlerReturns(t *testing.T) {
	srv := natstest.Run(t)
	nc := natstest.Connect(t, srv)
	svc, err := micro.AddService(nc, micro.Config{Name: "test-detach", Version: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	err = svc.AddEndpoint("applied", micro.HandlerFunc(func(r micro.Request) {
		d := rpc.Detach(nc, r)
		go func() {
			var req rpc.AppliedRequest
			if !rpc.Decode(d, &req) {
				return
			}
			if req.Stream != "CONVERSATIONS" {
				rpc.Fail(d, rpc.CodeBadRequest, "unknown stream")
				return
			}
			rpc.Respond(d, rpc.AppliedResponse{Applied: req.Sequence + 1})
		}()
	}), micro.WithEndpointSubject(rpc.AppliedSubject))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for range 20 {
		if err := rpc.WaitApplied(ctx, nc, "CONVERSATIONS", 41); err != nil {
			t.Fatal(err)
		}
		if err := rpc.WaitApplied(ctx, nc, "NOPE", 1); !rpc.IsCode(err, rpc.CodeBadRequest) {
			t.Fatalf("err = %v, want 400", err)
		}
	}
}
