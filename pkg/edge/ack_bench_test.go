package edge_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
)

// counting is a transport that keeps only the count and bytes of frames.
type counting struct{ frames, bytes atomic.Int64 }

func (c *counting) Send(_ context.Context, frame []byte) error {
	c.frames.Add(1)
	c.bytes.Add(int64(len(frame)))
	return nil
}

// BenchmarkAcknowledgement is the cost of the opt-in Acknowledgement per
// client envelope: a UserMessage taken by a session (validated, published
// to JetStream with fsync, PubAck awaited) without and with the feature.
// Reported: ns/op, and ack-bytes/op (the frame the client receives).
//
//	go test ./pkg/edge/ -run '^$' -bench Acknowledgement -benchtime 2000x -count 3
func BenchmarkAcknowledgement(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			ns := natstest.Run(b)
			js := natstest.JetStream(b, natstest.Connect(b, ns))
			if err := bus.EnsureStreams(context.Background(), js, bus.StreamsConfig{}); err != nil {
				b.Fatal(err)
			}
			tr := &counting{}
			s := edge.NewSession(js, nil, tr, edge.Options{User: "alice", QueueSize: 1 << 16, Log: zerolog.Nop(),
				Limits: edge.Limits{SessionRate: 1e9, SessionBurst: 1e9, UserRate: 1e9, UserBurst: 1e9, FloodLimit: 1 << 30}})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = s.Run(ctx) }()
			defer func() { cancel(); <-done }()
			feats := []protocol.ConfigurationFeaturesElem{"streaming"}
			if on {
				feats = append(feats, "acknowledgements")
			}
			frame, _ := protocol.Encode(protocol.Envelope{StanzaID: 1, Type: protocol.TypeConfiguration, Body: &protocol.Configuration{Features: feats}})
			s.HandleClient(ctx, frame)
			cid := s.ConversationID()
			if cid == "" {
				b.Fatal("not configured")
			}
			frames := make([][]byte, b.N)
			for i := range frames {
				frames[i], _ = protocol.Encode(protocol.Envelope{StanzaID: int32(i + 2), ConversationID: cid, Type: protocol.TypeUserMessage,
					Body: &protocol.UserMessage{ID: protocol.NewID("am"), ConversationID: cid, Content: "hello there"}})
			}
			before, bytesBefore := tr.frames.Load(), tr.bytes.Load()
			b.ResetTimer()
			for i := range b.N {
				s.HandleClient(ctx, frames[i])
			}
			b.StopTimer()
			if on {
				// Every frame written once the queue drains: the acks are b.N frames.
				for tr.frames.Load()-before < int64(b.N) {
					select {
					case <-s.Done():
						b.Fatal(s.Err())
					default:
						runtime.Gosched()
					}
				}
				b.ReportMetric(float64(tr.bytes.Load()-bytesBefore)/float64(tr.frames.Load()-before), "ack-bytes/op")
			}
		})
	}
}

// BenchmarkAcknowledgementFrame is the work the feature adds per envelope
// besides the write: encoding the Acknowledgement.
func BenchmarkAcknowledgementFrame(b *testing.B) {
	cid := protocol.NewID("ac")
	b.ReportAllocs()
	for i := range b.N {
		if _, err := protocol.Encode(protocol.New(cid, &protocol.Acknowledgement{ConversationID: cid, AcknowledgedStanzaID: int32(i), Success: true})); err != nil {
			b.Fatal(err)
		}
	}
}
