package conns

import (
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/subjects"
)

// Revocation is what a gateway replica tells the others on
// subjects.GatewayRevocations (core NATS): each ends its own connections
// to what it names. Ended sessions need none: every replica watches the
// sessions bucket (session.Store.WatchEnded).
type Revocation struct {
	// Conversation was deleted.
	Conversation string `json:"conversation,omitempty"`
}

// Publish tells every replica, this one included, of r. Core NATS: a
// replica cut off from NATS at that instant misses it; new connections to
// a deleted conversation are refused anyway (it is not found).
func Publish(nc *nats.Conn, r Revocation) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("conns: revocation: %w", err)
	}
	if err := nc.Publish(subjects.GatewayRevocations, b); err != nil {
		return fmt.Errorf("conns: publish revocation: %w", err)
	}
	return nil
}

// Subscribe hands every revocation published to apply until the
// subscription is drained or unsubscribed; one that does not decode is
// logged and dropped. It returns once the server has the subscription.
func Subscribe(nc *nats.Conn, log zerolog.Logger, apply func(Revocation)) (*nats.Subscription, error) {
	sub, err := nc.Subscribe(subjects.GatewayRevocations, func(m *nats.Msg) {
		var r Revocation
		if err := json.Unmarshal(m.Data, &r); err != nil {
			log.Warn().Err(err).Str("subject", m.Subject).Msg("a revocation that does not decode; dropped")
			return
		}
		apply(r)
	})
	if err != nil {
		return nil, fmt.Errorf("conns: subscribe to revocations: %w", err)
	}
	if err := nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("conns: subscribe to revocations: %w", err)
	}
	return sub, nil
}
