// Package edge is what every client-facing transport shares (the gateway's
// WebSocket, the room-agent's LiveKit data channel): it validates client
// envelopes and publishes them to JetStream, handles Configuration (new
// conversation or resume after lastSequenceSeen), and forwards the
// conversation's server envelopes stamped with stanza ids through a bounded
// queue, so a slow client is disconnected instead of slowing anyone else.
package edge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/telemetry"
)

// MetaUserID is the envelope meta key carrying the authenticated user; the
// edge sets it and persistence stores it on the conversation.
const MetaUserID = "alicia.user_id"

// MetaUtteranceID is the meta key of an input AudioChunk naming the
// utterance it recorded: the utterance id, which is also the id of its final
// Transcription and of the user message. The room-agent sets it; persistence
// stores the audio on that message, and the timeline links the chunk to it.
const MetaUtteranceID = "alicia.utterance_id"

// Transport sends one binary frame (a msgpack envelope) to the client.
type Transport interface {
	Send(ctx context.Context, frame []byte) error
}

// Authorizer says whether user may use an existing conversation; it returns
// ErrNotFound or ErrForbidden otherwise.
type Authorizer interface {
	Authorize(ctx context.Context, user, conversationID string) error
}

// Errors an Authorizer returns.
var (
	ErrNotFound  = errors.New("conversation not found")
	ErrForbidden = errors.New("conversation belongs to another user")
)

// ErrStopped is why a Configuration handled after the session ended does
// not start forwarding.
var ErrStopped = errors.New("edge: session stopped")

// ErrSlowClient ends a session whose client does not keep up.
var ErrSlowClient = errors.New("edge: client too slow, send queue full")

// Options of a session.
type Options struct {
	User string
	// Conversation, when set, binds the session to that one conversation
	// (a LiveKit room is one conversation): a Configuration without
	// conversationId means it, another one is refused with 203, and no
	// conversation is ever created. The transport has already checked the
	// user may use it (the room's token).
	Conversation string
	// OnConfigured, when set, is told the client's Configuration once the
	// session is bound (the room-agent learns the features it asked for).
	OnConfigured func(cid string, cfg *protocol.Configuration)
	// QueueSize bounds the frames waiting for the client (default 256).
	QueueSize int
	// Limits bound the client's envelopes per second and meta (zero
	// fields: DefaultLimits).
	Limits Limits
	// Users, when set, holds the per-user rates shared by the sessions of
	// the process; without it only the per-session rate applies.
	Users *UserRates
	// Accounts, when set, enforce the user's budgets in bytes and work
	// (Budgets); without it only the text and size budgets of Budgets
	// apply (zero fields: defaults).
	Accounts *Accounts
	Budgets  Budgets
	// Backlog, when set, says when the stream is too far ahead of
	// persistence to take more client input (pkg/backlog): the input is
	// refused (504, recoverable, saying when to retry) rather than the
	// stream dropping envelopes persistence has not applied.
	Backlog Backlog
	// SyncAnswerWait bounds the wait for the answer to one synced offline
	// message before the next is sent (default DefaultSyncAnswerWait).
	SyncAnswerWait time.Duration
	Log            zerolog.Logger
}

// Backlog says whether client input must be refused because the stream
// holds too much that persistence has not applied yet, why, and when to
// try again. It is read on every envelope: it must not block.
type Backlog interface {
	Refuse() (reason string, retryAfter time.Duration, refuse bool)
}

// Session is one client connection.
type Session struct {
	js      jetstream.JetStream
	pub     *bus.Publisher
	auth    Authorizer
	tr      Transport
	opts    Options
	limits  Limits
	budgets Budgets
	queue   chan []byte

	mu        sync.Mutex
	cid       string
	cfgStanza int32                      // stanza id of the Configuration that bound the session
	cancel    context.CancelFunc         // stops forwarding
	stopped   bool                       // Run ended: no forwarding may start
	rate      bucket                     // the session's envelopes per second
	sentAudio atomic.Bool                // an AudioChunk came on this connection (Pace)
	refused   int                        // envelopes refused for the rate since the last one taken
	acks      bool                       // the client asked for Acknowledgements (features)
	syncing   *syncState                 // the running sync's view of started answers
	syncs     map[int]context.CancelFunc // the running or waiting syncs, stopped with the session
	syncN     int
	syncMu    sync.Mutex // one sync at a time
	done      chan struct{}
	err       error
	once      sync.Once
}

// NewSession returns a session; Run must be called to deliver frames.
func NewSession(js jetstream.JetStream, auth Authorizer, tr Transport, opts Options) *Session {
	if opts.QueueSize <= 0 {
		opts.QueueSize = 256
	}
	budgets := opts.Budgets.WithDefaults()
	if opts.Accounts != nil {
		budgets = opts.Accounts.Budgets()
		opts.Accounts.Warm(opts.User)
	}
	return &Session{js: js, pub: bus.NewPublisher(js), auth: auth, tr: tr, opts: opts, limits: opts.Limits.withDefaults(), budgets: budgets,
		queue: make(chan []byte, opts.QueueSize), done: make(chan struct{})}
}

// ConversationID is the conversation the session is bound to ("" before Configuration).
func (s *Session) ConversationID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cid
}

// Run writes queued frames to the transport until ctx ends or the session
// fails (slow client, transport error). It returns why it ended.
func (s *Session) Run(ctx context.Context) error {
	defer s.stopForwarding()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.done:
			switch err := s.Err(); {
			case errors.Is(err, ErrSlowClient):
				s.sayGoodbye(ctx, "client too slow: disconnecting; reconnect with lastSequenceSeen")
			case errors.Is(err, ErrFlooding):
				s.drain(ctx) // the refusals queued before
				s.sayGoodbye(ctx, "too many envelopes beyond the rate limit: disconnecting")
			}
			return s.Err()
		case frame := <-s.queue:
			if err := s.tr.Send(ctx, frame); err != nil {
				s.fail(fmt.Errorf("edge: send: %w", err))
				return s.Err()
			}
		}
	}
}

// Done is closed when the session failed; Err says why.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err is why the session ended.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *Session) fail(err error) {
	s.once.Do(func() {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		close(s.done)
	})
}

// sayGoodbye tells a client that is dropped for being slow why, bypassing the
// full queue, with a short deadline.
func (s *Session) sayGoodbye(ctx context.Context, why string) {
	cid := s.ConversationID()
	frame, err := protocol.Encode(protocol.New(cid, &protocol.ErrorMessage{ID: protocol.NewID("aerr"), ConversationID: cid,
		Code: protocol.CodeOverloaded, Message: why, Severity: 3, Recoverable: true}))
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_ = s.tr.Send(ctx, frame)
}

// drain writes what is queued, with a short deadline.
func (s *Session) drain(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	for {
		select {
		case frame := <-s.queue:
			if s.tr.Send(ctx, frame) != nil {
				return
			}
		default:
			return
		}
	}
}

// enqueue hands a frame to the writer, failing the session when the client
// is too slow to take it.
func (s *Session) enqueue(frame []byte) {
	select {
	case s.queue <- frame:
	case <-s.done:
	default:
		s.fail(ErrSlowClient)
	}
}

// sendError queues an ErrorMessage for the client (not stored: it answers
// input that never reached the stream).
func (s *Session) sendError(code int32, msg string, originating *string) {
	cid := s.ConversationID()
	env := protocol.New(cid, &protocol.ErrorMessage{ID: protocol.NewID("aerr"), ConversationID: cid, Code: code, Message: msg,
		Severity: 2, Recoverable: code < 500 || code == protocol.CodeBackendUnavailable || code == protocol.CodeOverloaded, OriginatingID: originating})
	frame, err := protocol.Encode(env)
	if err != nil {
		s.opts.Log.Error().Err(err).Msg("encode ErrorMessage")
		return
	}
	s.enqueue(frame)
}

func (s *Session) logger() *zerolog.Logger {
	l := telemetry.ForConversation(s.opts.Log, s.ConversationID())
	return &l
}

// validConversation reports whether cid may be used in subjects.
func validConversation(cid string) bool { return subjects.Validate(cid) == nil }
