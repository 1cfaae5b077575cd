package edge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// tracer starts the root span of what a client sends: a turn's trace
// begins where its UserMessage enters the system.
var tracer = otel.Tracer("github.com/alicia-voice/alicia/pkg/edge")

// HandleClientError answers input the transport itself rejected (a text
// frame on a binary protocol, say) with an ErrorMessage.
func (s *Session) HandleClientError(code int32, message string) { s.sendError(code, message, nil) }

// HandleClient takes one frame from the client. Invalid input is answered
// with an ErrorMessage and the session stays open; a valid envelope is
// published to JetStream (after Configuration has bound the conversation).
func (s *Session) HandleClient(ctx context.Context, frame []byte) {
	if why := s.admit(); why != "" {
		s.overLimit(why)
		return
	}
	env, err := protocol.Decode(frame)
	if err != nil {
		code := protocol.Code(err)
		if code == 0 {
			code = protocol.CodeMalformed
		}
		s.sendError(code, err.Error(), nil)
		return
	}
	if env.Type.Internal() {
		s.sendError(protocol.CodeUnknownType, fmt.Sprintf("message type %d is internal to the server", env.Type), nil)
		return
	}
	if why := refuse(&env); why != "" {
		s.sendError(protocol.CodeForbidden, why, nil)
		s.acknowledge(&env, false)
		return
	}
	if why := s.limits.checkMeta(env.Meta); why != "" {
		s.sendError(protocol.CodeInvalidBody, why, nil)
		s.acknowledge(&env, false)
		return
	}
	if why := invalidBody(&env); why != "" {
		s.sendError(protocol.CodeInvalidBody, why, nil)
		s.acknowledge(&env, false)
		return
	}
	if o := s.budgets.checkTexts(&env, len(frame)); o != nil {
		s.overBudget(o, &env)
		return
	}
	if env.Type == protocol.TypeConfiguration {
		s.configure(ctx, env)
		return
	}
	cid := s.ConversationID()
	if cid == "" {
		s.sendError(protocol.CodeInvalidState, "send Configuration first", nil)
		return
	}
	if env.ConversationID != "" && env.ConversationID != cid {
		s.sendError(protocol.CodeForbidden, fmt.Sprintf("this connection is bound to conversation %s", cid), nil)
		return
	}
	if env.StanzaID <= 0 {
		s.sendError(protocol.CodeMalformed, "client envelopes need a positive stanzaId", nil)
		return
	}
	env.ConversationID = cid
	if s.refuseForBacklog(&env) {
		return
	}
	if s.opts.Accounts != nil {
		var audio int64
		if ac, ok := env.Body.(*protocol.AudioChunk); ok {
			audio = int64(len(ac.Data))
			s.sentAudio.Store(true)
		}
		if o := s.opts.Accounts.Envelope(s.opts.User, int64(len(frame)), audio, stores(&env)); o != nil {
			s.overBudget(o, &env)
			return
		}
	}
	if !s.publish(ctx, env) {
		return
	}
	if b, ok := env.Body.(*protocol.SyncRequest); ok {
		s.startSync(cid, env.StanzaID, b)
	}
}

// acknowledge tells a client that asked for them (Configuration.features
// "acknowledgements") whether its envelope was stored by JetStream (the
// publish ack) or refused (after the ErrorMessage saying why). Not stored:
// it answers this connection only.
func (s *Session) acknowledge(env *protocol.Envelope, ok bool) {
	s.mu.Lock()
	acks, cid := s.acks, s.cid
	s.mu.Unlock()
	if !acks || env.StanzaID <= 0 {
		return
	}
	frame, err := protocol.Encode(protocol.New(cid, &protocol.Acknowledgement{ConversationID: cid, AcknowledgedStanzaID: env.StanzaID, Success: ok}))
	if err != nil {
		s.opts.Log.Error().Err(err).Msg("encode Acknowledgement")
		return
	}
	s.enqueue(frame)
}

// refuseForBacklog answers input refused because the stream is too far
// ahead of persistence (Options.Backlog). Stopping an answer is always
// taken: it adds nothing to wait for.
func (s *Session) refuseForBacklog(env *protocol.Envelope) bool {
	if s.opts.Backlog == nil || env.Type == protocol.TypeControlStop {
		return false
	}
	why, retry, refuse := s.opts.Backlog.Refuse()
	if !refuse {
		return false
	}
	refused(RefusedBacklog)
	msg := fmt.Sprintf("%s; send this again in %s", why, roundUp(retry))
	cid := s.ConversationID()
	out := protocol.New(cid, &protocol.ErrorMessage{ID: protocol.NewID("aerr"), ConversationID: cid, Code: protocol.CodeOverloaded,
		Message: msg, Severity: 2, Recoverable: true, OriginatingID: bodyID(env)})
	out.Meta = map[string]any{MetaRetryAfterMs: retry.Milliseconds()}
	if frame, err := protocol.Encode(out); err == nil {
		s.enqueue(frame)
	}
	s.acknowledge(env, false)
	return true
}

// overBudget answers an envelope refused for a budget: ErrorMessage 505
// naming the budget and when it frees (also in meta alicia.budget and
// alicia.retry_after_ms), the connection kept and nothing published.
func (s *Session) overBudget(o *OverBudget, env *protocol.Envelope) {
	now := time.Now()
	if s.opts.Accounts != nil {
		now = s.opts.Accounts.Now() // the clock FreeAt was computed on
	}
	cid := s.ConversationID()
	em := &protocol.ErrorMessage{ID: protocol.NewID("aerr"), ConversationID: cid, Code: protocol.CodeOverBudget,
		Message: o.Message(now), Severity: 2, Recoverable: true, OriginatingID: bodyID(env)}
	out := protocol.New(cid, em)
	out.Meta = map[string]any{MetaBudget: o.Budget, MetaRetryAfterMs: o.RetryAfter(now).Milliseconds()}
	frame, err := protocol.Encode(out)
	if err != nil {
		s.opts.Log.Error().Err(err).Msg("encode ErrorMessage")
		return
	}
	refused(o.Budget)
	s.logger().Info().Str("user", s.opts.User).Str("budget", o.Budget).Str("type", env.Type.String()).Msg("input over budget refused")
	s.enqueue(frame)
	s.acknowledge(env, false)
}

// overLimit answers an envelope refused for the rate (nothing published) and
// disconnects a client that keeps sending regardless.
func (s *Session) overLimit(why string) {
	s.mu.Lock()
	s.refused++
	flooding := s.refused >= s.limits.FloodLimit
	s.mu.Unlock()
	if flooding {
		refused(RefusedFlooding)
		s.logger().Warn().Str("user", s.opts.User).Msg("client flooding beyond its envelope rate; disconnecting")
		s.fail(ErrFlooding)
		return
	}
	refused(RefusedEnvelopeRate)
	s.sendError(protocol.CodeOverloaded, why, nil)
}

// publish stores a client envelope in JetStream, and reports whether it did.
func (s *Session) publish(ctx context.Context, env protocol.Envelope) bool {
	env.Meta = clientMeta(env.Meta, s.opts.User) // alicia.* keys are set by the edge and services, never trusted from the client
	// A new trace per envelope received (the client's own trace context is
	// not trusted): its id goes into the envelope's meta, and from there
	// into every span and row the envelope leads to.
	ctx, span := tracer.Start(ctx, "edge.receive "+env.Type.String(), trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("alicia.conversation_id", env.ConversationID), attribute.String("alicia.message_type", env.Type.String())))
	defer span.End()
	if um, ok := env.Body.(*protocol.UserMessage); ok {
		span.SetAttributes(attribute.String("alicia.message_id", um.ID))
	}
	if _, err := s.pub.PublishClient(ctx, env); err != nil {
		span.SetStatus(codes.Error, err.Error())
		s.logger().Error().Err(err).Str("type", env.Type.String()).Msg("publish client envelope")
		s.sendError(protocol.CodeInternal, "could not store the envelope; send it again", nil)
		s.acknowledge(&env, false)
		return false
	}
	s.acknowledge(&env, true)
	return true
}

// configure binds the session: a new conversation when the Configuration has
// no conversationId, otherwise an existing one the user may use; then it
// starts forwarding server envelopes after lastSequenceSeen.
func (s *Session) configure(ctx context.Context, env protocol.Envelope) {
	cfg := env.Body.(*protocol.Configuration)
	if s.ConversationID() != "" {
		s.mu.Lock()
		resent := env.StanzaID > 0 && env.StanzaID == s.cfgStanza
		s.mu.Unlock()
		if resent {
			return // the client sent it again before our answer reached it (a data channel still opening)
		}
		s.sendError(protocol.CodeInvalidState, "already configured; open a new connection for another conversation", nil)
		return
	}
	cid, fresh := "", cfg.ConversationID == nil
	if bound := s.opts.Conversation; bound != "" {
		if cfg.ConversationID != nil && *cfg.ConversationID != bound {
			s.sendError(protocol.CodeForbidden, fmt.Sprintf("this connection is bound to conversation %s", bound), nil)
			return
		}
		cid, fresh = bound, false
	} else if fresh {
		// The new conversation's owner is stored from this Configuration's
		// meta: it must reach the stream, which takes a client stanza id.
		if env.StanzaID <= 0 {
			s.sendError(protocol.CodeMalformed, "a Configuration that starts a conversation needs a positive stanzaId", nil)
			return
		}
		cid = protocol.NewID("ac")
		if s.opts.Accounts != nil {
			if o := s.opts.Accounts.Conversation(s.opts.User, cid); o != nil {
				s.overBudget(o, &env)
				return
			}
		}
	} else {
		cid = *cfg.ConversationID
		if !validConversation(cid) {
			s.sendError(protocol.CodeInvalidBody, "conversationId is not a valid id", nil)
			return
		}
		if err := s.auth.Authorize(ctx, s.opts.User, cid); err != nil {
			switch {
			case errors.Is(err, ErrNotFound):
				s.sendError(protocol.CodeNotFound, "conversation not found", nil)
			case errors.Is(err, ErrForbidden):
				s.sendError(protocol.CodeForbidden, "conversation belongs to another user", nil)
			default:
				s.logger().Error().Err(err).Msg("authorize")
				s.sendError(protocol.CodeInternal, "could not check the conversation", nil)
			}
			return
		}
	}
	s.mu.Lock()
	s.cid, s.cfgStanza = cid, env.StanzaID
	s.acks = slices.Contains(cfg.Features, protocol.ConfigurationFeaturesElemAcknowledgements)
	s.mu.Unlock()

	var after int32
	if cfg.LastSequenceSeen != nil {
		after = *cfg.LastSequenceSeen
	}
	if err := s.startForwarding(ctx, cid, fresh, after); err != nil {
		s.logger().Error().Err(err).Msg("start forwarding")
		s.fail(err)
		return
	}
	if env.StanzaID > 0 {
		env.ConversationID = cid
		s.publish(ctx, env)
	}
	if s.opts.OnConfigured != nil {
		s.opts.OnConfigured(cid, cfg)
	}
	// The answer goes through the stream like every server envelope, so it
	// carries a stanza id and is part of the conversation's record.
	reply := protocol.New(cid, &protocol.Configuration{ConversationID: &cid, Features: cfg.Features})
	if _, err := s.pub.PublishServer(ctx, reply, ""); err != nil {
		s.logger().Error().Err(err).Msg("publish Configuration reply")
		s.sendError(protocol.CodeInternal, "could not confirm the configuration", nil)
	}
}
