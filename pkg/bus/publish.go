package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/telemetry"
)

// ErrNoConversation is returned when a conversation envelope has no valid conversation id.
var ErrNoConversation = errors.New("bus: envelope has no valid conversationId")

// Publisher puts protocol envelopes on their subjects.
type Publisher struct{ js jetstream.JetStream }

// NewPublisher returns a publisher on js.
func NewPublisher(js jetstream.JetStream) *Publisher { return &Publisher{js: js} }

// ClientMsgID is the de-duplication id of a client envelope: a client that
// resends after a reconnect reuses its stanza id, so JetStream drops the copy.
func ClientMsgID(cid string, stanzaID int32) string {
	return cid + ":" + strconv.FormatInt(int64(stanzaID), 10)
}

// PublishClient publishes an envelope received from a client on
// alicia.conv.{cid}.client.{type} with Nats-Msg-Id {cid}:{stanzaId}.
func (p *Publisher) PublishClient(ctx context.Context, env protocol.Envelope) (*jetstream.PubAck, error) {
	if subjects.Validate(env.ConversationID) != nil {
		return nil, ErrNoConversation
	}
	var opts []jetstream.PublishOpt
	if env.StanzaID > 0 {
		opts = append(opts, jetstream.WithMsgID(ClientMsgID(env.ConversationID, env.StanzaID)))
	}
	return p.publish(ctx, subjects.Client(env.ConversationID, env.Type), env, opts...)
}

// PublishServer publishes a server envelope on alicia.conv.{cid}.server.{type}.
// Its stanza id is left to the edge that delivers it (see StampServer).
// msgID, when not empty, de-duplicates a producer's retry.
func (p *Publisher) PublishServer(ctx context.Context, env protocol.Envelope, msgID string) (*jetstream.PubAck, error) {
	return p.publishConv(ctx, subjects.OriginServer, env, msgID)
}

// PublishOnBehalf publishes a client envelope that a service makes for the
// user (the asr's UserMessage from a final transcription, the room-agent's
// ControlStop on barge-in) on alicia.conv.{cid}.client.{type}. It carries
// no stanza id (the client did not number it); msgID de-duplicates retries
// and redeliveries.
func (p *Publisher) PublishOnBehalf(ctx context.Context, env protocol.Envelope, msgID string) (*jetstream.PubAck, error) {
	return p.publishConv(ctx, subjects.OriginClient, env, msgID)
}

// PublishAgent publishes an internal envelope about one conversation
// (SentenceAudio, SentencePlayout) on alicia.conv.{cid}.agent.{type}: stored
// and persisted, never forwarded to a client.
func (p *Publisher) PublishAgent(ctx context.Context, env protocol.Envelope, msgID string) (*jetstream.PubAck, error) {
	return p.publishConv(ctx, subjects.OriginAgent, env, msgID)
}

// publishConv publishes env without a stanza id on alicia.conv.{cid}.{origin}.{type};
// msgID, when not empty, de-duplicates retries.
func (p *Publisher) publishConv(ctx context.Context, origin subjects.Origin, env protocol.Envelope, msgID string) (*jetstream.PubAck, error) {
	if subjects.Validate(env.ConversationID) != nil {
		return nil, ErrNoConversation
	}
	env.StanzaID = 0
	var opts []jetstream.PublishOpt
	if msgID != "" {
		opts = append(opts, jetstream.WithMsgID(msgID))
	}
	var subject string
	switch origin {
	case subjects.OriginServer:
		subject = subjects.Server(env.ConversationID, env.Type)
	case subjects.OriginAgent:
		subject = subjects.Agent(env.ConversationID, env.Type)
	default:
		subject = subjects.Client(env.ConversationID, env.Type)
	}
	return p.publish(ctx, subject, env, opts...)
}

// PublishSystem publishes an envelope not tied to one conversation on alicia.sys.{type}.
func (p *Publisher) PublishSystem(ctx context.Context, env protocol.Envelope, msgID string) (*jetstream.PubAck, error) {
	var opts []jetstream.PublishOpt
	if msgID != "" {
		opts = append(opts, jetstream.WithMsgID(msgID))
	}
	return p.publish(ctx, subjects.System(env.Type), env, opts...)
}

func (p *Publisher) publish(ctx context.Context, subject string, env protocol.Envelope, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	env.Meta = telemetry.InjectMeta(ctx, env.Meta)
	data, err := protocol.Encode(env)
	if err != nil {
		return nil, fmt.Errorf("bus: encode %s: %w", env.Type, err)
	}
	ack, err := p.js.Publish(ctx, subject, data, opts...)
	if err != nil {
		return nil, fmt.Errorf("bus: publish %s: %w", subject, err)
	}
	return ack, nil
}
