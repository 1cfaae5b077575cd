package protocol

import (
	"encoding/json"
	"fmt"

	protoschemas "github.com/alicia-voice/alicia/proto-schemas"
)

// Sender is who may publish a message type, as its schema's
// x-alicia-senders lists it (proto-schemas/README.md).
type Sender string

const (
	// SenderClient: a client through an edge (WebSocket, LiveKit data
	// channel) or the gateway's REST API on the user's behalf.
	SenderClient Sender = "client"
	// SenderServer: a service, on a conversation's client or server subject
	// or on alicia.sys.
	SenderServer Sender = "server"
	// SenderAgent: a service, on a conversation's agent subject.
	SenderAgent Sender = "agent"
)

// senders holds each type's senders, read from the embedded schemas at init:
// the schemas, not a list in Go, say what a client may send. The schemas are
// compiled in, so a missing or wrong annotation is a build defect.
var senders = func() map[MessageType][]Sender {
	m, err := loadSenders()
	if err != nil {
		panic(err)
	}
	return m
}()

func loadSenders() (map[MessageType][]Sender, error) {
	out := make(map[MessageType][]Sender, len(registry))
	for t, info := range registry {
		raw, err := protoschemas.FS.ReadFile(info.token + ".json")
		if err != nil {
			return nil, err
		}
		var doc struct {
			Senders []Sender `json:"x-alicia-senders"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			return nil, fmt.Errorf("protocol: %s.json: %w", info.token, err)
		}
		if len(doc.Senders) == 0 {
			return nil, fmt.Errorf("protocol: %s.json has no x-alicia-senders", info.token)
		}
		for _, s := range doc.Senders {
			switch s {
			case SenderClient, SenderServer, SenderAgent:
			default:
				return nil, fmt.Errorf("protocol: %s.json: unknown sender %q", info.token, s)
			}
		}
		out[t] = doc.Senders
	}
	return out, nil
}

// Senders returns who may send messages of type t (nil for an unknown type).
func (t MessageType) Senders() []Sender { return senders[t] }

// ClientMaySend reports whether a client may send messages of type t: an
// edge refuses every other type (203) and publishes nothing.
func (t MessageType) ClientMaySend() bool {
	for _, s := range senders[t] {
		if s == SenderClient {
			return true
		}
	}
	return false
}
