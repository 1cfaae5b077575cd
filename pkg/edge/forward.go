package edge

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
)

// startForwarding delivers the conversation's server envelopes, in stream
// order, from just after the stanza id the client saw last (everything for
// a new conversation, only new ones when the client saw nothing), each
// stamped with stanzaId = -(stream sequence).
func (s *Session) startForwarding(ctx context.Context, cid string, fresh bool, lastSeen int32) error {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{subjects.ServerAll(cid)}}
	switch {
	case fresh:
		cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	case lastSeen < 0:
		start := bus.SequenceOfStanza(lastSeen) + 1
		beyond, err := s.beyondStreamEnd(ctx, start)
		if err != nil {
			return err
		}
		if beyond {
			// The client's position was read from another stream of this
			// name (a new JetStream store or cluster numbers from 1 again):
			// starting there would skip what this stream holds for it.
			s.logger().Warn().Int32("last_sequence_seen", lastSeen).
				Msg("the client's last sequence lies beyond the stream's end (a new stream?): delivering the conversation from its start")
			cfg.DeliverPolicy = jetstream.DeliverAllPolicy
		} else {
			cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, start
		}
	default:
		cfg.DeliverPolicy = jetstream.DeliverNewPolicy
	}
	cons, err := s.js.OrderedConsumer(ctx, bus.StreamConversations, cfg)
	if err != nil {
		return fmt.Errorf("edge: consumer for %s: %w", cid, err)
	}
	fctx, cancel := context.WithCancel(context.Background())
	// In a NATS cluster the consumer is one server's: when that server goes,
	// it is recreated within ~2 s (bus.PullHeartbeat).
	cc, err := cons.Consume(func(m jetstream.Msg) { s.forward(fctx, m) }, bus.FollowOpts()...)
	if err != nil {
		cancel()
		return fmt.Errorf("edge: consume %s: %w", cid, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		// The session ended while this Configuration was being handled:
		// nobody would ever stop this consumer.
		cancel()
		cc.Stop()
		return ErrStopped
	}
	s.cancel = func() { cancel(); cc.Stop() }
	return nil
}

// beyondStreamEnd reports whether start lies past the next sequence the
// conversations stream will assign.
func (s *Session) beyondStreamEnd(ctx context.Context, start uint64) (bool, error) {
	st, err := s.js.Stream(ctx, bus.StreamConversations)
	if err != nil {
		return false, fmt.Errorf("edge: stream %s: %w", bus.StreamConversations, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return false, fmt.Errorf("edge: stream %s: %w", bus.StreamConversations, err)
	}
	return start > info.State.LastSeq+1, nil
}

func (s *Session) forward(ctx context.Context, m jetstream.Msg) {
	if ctx.Err() != nil {
		return
	}
	md, err := m.Metadata()
	if err != nil {
		return
	}
	env, err := protocol.Decode(m.Data())
	if err != nil {
		s.logger().Error().Err(err).Uint64("seq", md.Sequence.Stream).Msg("invalid server envelope in the stream; not forwarded")
		return
	}
	if sa, ok := env.Body.(*protocol.StartAnswer); ok {
		s.answerStarted(sa.ID, sa.PreviousID) // a sync may wait for it (sync.go)
	}
	if err := bus.StampServer(&env, md.Sequence.Stream); err != nil {
		s.fail(err)
		return
	}
	frame, err := protocol.Encode(env)
	if err != nil {
		s.logger().Error().Err(err).Msg("encode server envelope")
		return
	}
	s.enqueue(frame)
}

// stopForwarding stops the consumer and marks the session stopped, so a
// Configuration still being handled never starts one after it.
func (s *Session) stopForwarding() {
	s.mu.Lock()
	stop := s.cancel
	s.cancel, s.stopped = nil, true
	syncs := s.syncs
	s.syncs = nil
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
	for _, c := range syncs {
		c() // a sync stops with its session: the client sends it again
	}
}
