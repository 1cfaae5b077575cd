package edge

import (
	"context"
	"testing"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
)

type discard struct{}

func (discard) Send(context.Context, []byte) error { return nil }

// TestNoForwardingAfterTheSessionEnded: a Configuration handled after Run
// returned (the connection closed while its reader was still busy with it)
// leaves no consumer running that nobody would ever stop.
func TestNoForwardingAfterTheSessionEnded(t *testing.T) {
	ns := natstest.Run(t)
	js := natstest.JetStream(t, natstest.Connect(t, ns))
	ctx := context.Background()
	if err := bus.EnsureStreams(ctx, js, bus.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	s := NewSession(js, nil, discard{}, Options{User: "u", Log: zerolog.Nop()})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(runCtx) }()
	cancel()
	<-done
	frame, err := protocol.Encode(protocol.Envelope{StanzaID: 1, Type: protocol.TypeConfiguration, Body: &protocol.Configuration{}})
	if err != nil {
		t.Fatal(err)
	}
	s.HandleClient(ctx, frame)
	s.mu.Lock()
	running := s.cancel != nil
	s.mu.Unlock()
	if running {
		t.Fatal("forwarding started after the session ended and will never be stopped")
	}
}
