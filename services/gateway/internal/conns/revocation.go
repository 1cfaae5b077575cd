package conns

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
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

// Subscribe hands every revocation published to apply until Close; one
// that does not decode is counted and logged (bus.Routes) and dropped. It
// returns once the server has the subscription.
func Subscribe(nc *nats.Conn, log zerolog.Logger, apply func(Revocation)) (*bus.Subscriptions, error) {
	rt := bus.NewRoutes("gateway", log)
	bus.OnDecoded(rt, "revocation", subjects.GatewayRevocations, bus.JSON[Revocation], func(_ context.Context, r Revocation, _ bus.Inbound) error {
		apply(r)
		return nil
	})
	subs, err := rt.Subscribe(context.Background(), nc)
	if err != nil {
		return nil, fmt.Errorf("conns: subscribe to revocations: %w", err)
	}
	return subs, nil
}
