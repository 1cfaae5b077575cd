package protocol_test

import (
	"testing"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

func typicalSentence() protocol.Envelope {
	return protocol.Envelope{
		StanzaID:       -1234,
		ConversationID: "ac_7Qm2Xv9LpR4tYb8NcK3w",
		Type:           protocol.TypeAssistantSentence,
		Meta: map[string]any{
			"messaging.trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
			"messaging.span_id":  "00f067aa0ba902b7",
		},
		Body: &protocol.AssistantSentence{
			ID:             protocol.Ptr("ams_C3vB5nM7kL9jH1gF"),
			PreviousID:     "am_Z9yX8wV7uT6sR5qP4oN3",
			ConversationID: "ac_7Qm2Xv9LpR4tYb8NcK3w",
			Sequence:       3,
			Text:           "Tomorrow in Lisbon expect light rain in the morning, around 17 degrees.",
			IsFinal:        protocol.Ptr(false),
		},
	}
}

func BenchmarkDecode(b *testing.B) {
	data, err := protocol.Encode(typicalSentence())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := protocol.Decode(data); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "envelopes/s")
}

func BenchmarkEncode(b *testing.B) {
	env := typicalSentence()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := protocol.Encode(env); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "envelopes/s")
}

func BenchmarkDecodeParallel(b *testing.B) {
	data, err := protocol.Encode(typicalSentence())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := protocol.Decode(data); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "envelopes/s")
}
