// Package chatcmd implements `alicia chat`: a text conversation over the
// gateway's WebSocket. It streams answers sentence by sentence, shows tool
// calls, memories and reasoning, stops an answer on Ctrl-C, regenerates and
// edits, and reconnects by itself after a drop without losing or repeating
// a word (lastSequenceSeen).
package chatcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/cli/internal/api"
	"github.com/alicia-voice/alicia/services/cli/internal/style"
)

// Options of a chat.
type Options struct {
	API            *api.Client // gateway address and key; resuming reads the conversation through it
	ConversationID string      // "" starts a new conversation
	In             io.Reader   // lines typed or piped
	Out, Err       io.Writer   // the conversation; session notes
	Style          style.Style // colours for Out
	// Interactive is true when a person types at a terminal: a prompt is
	// shown and what they type is not echoed again.
	Interactive bool
	// Interrupts delivers Ctrl-C: it stops a streaming answer, and ends the
	// chat at the prompt.
	Interrupts <-chan os.Signal
	// AnswerTimeout ends the wait for an answer when the server sends
	// nothing about it for this long (default 2m).
	AnswerTimeout time.Duration
	Backoff       Backoff
}

// Backoff paces reconnection: Min doubling up to Max (with jitter), for at
// most GiveUp in a row.
type Backoff struct {
	Min, Max, GiveUp time.Duration
}

// resendWindow is how old a sent envelope may be and still be resent after a
// reconnect: well inside JetStream's 2-minute de-duplication window, so a
// copy of one that did arrive is dropped by the server, never doubled.
const resendWindow = 90 * time.Second

func (o *Options) defaults() {
	if o.AnswerTimeout <= 0 {
		o.AnswerTimeout = 2 * time.Minute
	}
	if o.Backoff.Min <= 0 {
		o.Backoff.Min = 250 * time.Millisecond
	}
	if o.Backoff.Max <= 0 {
		o.Backoff.Max = 10 * time.Second
	}
	if o.Backoff.GiveUp <= 0 {
		o.Backoff.GiveUp = 5 * time.Minute
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Err == nil {
		o.Err = io.Discard
	}
}

// Run holds the conversation until the user quits (/quit, Ctrl-D, Ctrl-C at
// the prompt), input ends (after the last answer), or ctx ends. Its error is
// printable: a server's words in it cannot drive the terminal.
func Run(ctx context.Context, o Options) (err error) {
	defer func() {
		if err != nil && style.Printable(err.Error()) != err.Error() {
			err = printableError{err}
		}
	}()
	o.defaults()
	s := &session{o: o, cid: o.ConversationID, next: 1,
		p:         &printer{out: o.Out, err: o.Err, st: o.Style, interactive: o.Interactive},
		stopped:   map[string]bool{},
		toolNames: map[string]string{}, toolAnswer: map[string]string{}}
	if s.cid != "" {
		if err := s.resume(ctx); err != nil {
			return err
		}
	}
	c, err := dial(ctx, o.API)
	if err != nil {
		return err
	}
	s.conn = c
	defer func() { s.conn.close(true) }()
	s.touch()
	if err := s.configure(ctx); err != nil {
		return err
	}
	quit := make(chan struct{})
	defer close(quit)
	err = s.loop(ctx, readLines(o.In, quit))
	s.p.endLine()
	return err
}

// session is the client's side of one conversation.
type session struct {
	o    Options
	p    *printer
	conn *conn

	cid        string
	configured bool  // the server confirmed this connection's Configuration
	announced  bool  // the conversation id was shown
	next       int32 // next client stanza id
	lastSeen   int32 // last server stanza id received (negative; 0 = none)
	outbox     []sent

	awaiting   bool      // a request (message, variation) waits for its answer
	answerID   string    // the answer streaming now
	lastEvent  time.Time // last sign of life of the awaited answer
	stopped    map[string]bool
	stopNext   string // user message whose answer was stopped before it started
	lastUser   string
	lastAnswer string
	failed     int // answers that failed

	toolNames  map[string]string // tool use id → tool name
	toolAnswer map[string]string // tool use id → answer id
}

type sent struct {
	env protocol.Envelope
	at  time.Time
}

// errQuit ends the loop without an error.
var errQuit = errors.New("quit")

func (s *session) busy() bool { return s.awaiting || s.answerID != "" }

func (s *session) loop(ctx context.Context, lines <-chan string) error {
	for {
		var input <-chan string
		if s.configured && !s.busy() {
			input = lines
			s.p.prompt()
		}
		var timeout <-chan time.Time
		if s.busy() || !s.configured {
			timeout = time.After(time.Until(s.lastEvent.Add(s.o.AnswerTimeout)))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.o.Interrupts:
			if !s.busy() {
				return s.result()
			}
			if err := s.stop(ctx); err != nil {
				return err
			}
		case line, ok := <-input:
			if !ok {
				return s.result()
			}
			s.p.inputTaken()
			if err := s.handleLine(ctx, line); err != nil {
				if errors.Is(err, errQuit) {
					return s.result()
				}
				return err
			}
		case frame := <-s.conn.frames:
			if err := s.handleFrame(frame); err != nil {
				return err
			}
		case err := <-s.conn.done:
			if err := s.reconnect(ctx, err); err != nil {
				if errors.Is(err, errQuit) {
					return s.result()
				}
				return err
			}
		case <-timeout:
			if !s.configured {
				return fmt.Errorf("the gateway did not confirm the conversation within %s", s.o.AnswerTimeout)
			}
			s.p.endAnswer("")
			s.p.errorLine(0, fmt.Sprintf("no answer from the server within %s (is the llm service running?)", s.o.AnswerTimeout))
			s.endTurn(true)
		}
	}
}

// result is how a chat that ends normally ends: with ErrTurnsFailed when
// input came from a pipe and an answer failed.
func (s *session) result() error {
	if !s.o.Interactive && s.failed > 0 {
		return fmt.Errorf("%w (%d)", ErrTurnsFailed, s.failed)
	}
	return nil
}

func (s *session) endTurn(failed bool) {
	s.awaiting, s.answerID = false, ""
	if failed {
		s.failed++
	}
}

// features the CLI handles.
var features = []protocol.ConfigurationFeaturesElem{
	protocol.ConfigurationFeaturesElemStreaming,
	protocol.ConfigurationFeaturesElemReasoningSteps,
	protocol.ConfigurationFeaturesElemToolUse,
}

// configure sends the Configuration that binds the connection: a new
// conversation, or the known one after the last server stanza seen.
func (s *session) configure(ctx context.Context) error {
	cfg := &protocol.Configuration{Features: features, ClientVersion: protocol.Ptr("alicia-cli"), Device: protocol.Ptr("cli")}
	if s.cid != "" {
		cfg.ConversationID = protocol.Ptr(s.cid)
	}
	if s.lastSeen != 0 {
		cfg.LastSequenceSeen = protocol.Ptr(s.lastSeen)
	}
	return s.conn.send(ctx, s.envelope(cfg))
}

// envelope stamps body with the next client stanza id.
func (s *session) envelope(body protocol.Body) protocol.Envelope {
	env := protocol.Envelope{StanzaID: s.next, ConversationID: s.cid, Type: body.MessageType(), Body: body}
	s.next++
	return env
}

// send sends a conversation envelope and keeps it for a resend after a
// reconnect. A failed write is left to the reconnection, which resends it.
func (s *session) send(ctx context.Context, body protocol.Body) {
	env := s.envelope(body)
	now := time.Now()
	keep := s.outbox[:0]
	for _, m := range s.outbox {
		if now.Sub(m.at) < resendWindow {
			keep = append(keep, m)
		}
	}
	s.outbox = append(keep, sent{env: env, at: now})
	_ = s.conn.send(ctx, env)
}

// reconnect replaces a dropped connection, with backoff, then resumes after
// the last server stanza seen and resends what may not have arrived.
func (s *session) reconnect(ctx context.Context, cause error) error {
	s.conn.close(false)
	if err := revoked(cause); err != nil {
		return err
	}
	s.p.note("connection to the gateway lost (%v); reconnecting…", rootCause(cause))
	start, delay, said := time.Now(), s.o.Backoff.Min, ""
	for {
		wait := time.Duration(float64(delay) * (0.8 + 0.4*rand.Float64()))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.o.Interrupts:
			return errQuit
		case <-time.After(wait):
		}
		err := s.redial(ctx)
		if err == nil {
			break
		}
		var perm permanentError
		if errors.As(err, &perm) {
			return err
		}
		if time.Since(start) >= s.o.Backoff.GiveUp {
			return fmt.Errorf("%w after %s: %v", ErrGaveUp, s.o.Backoff.GiveUp, err)
		}
		delay = min(delay*2, s.o.Backoff.Max)
		if why := err.Error(); why != said {
			s.p.note("%s; retrying every few seconds, Ctrl-C leaves", why)
			said = why
		}
	}
	if s.busy() {
		s.lastEvent = time.Now() // the wait for the answer starts again
	}
	s.p.note("reconnected")
	return nil
}

// rootCause is the innermost error: "connection refused" rather than the
// whole chain of the dial.
func rootCause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

// redial opens a new connection, configures it to resume after the last
// server stanza seen, and resends the recent envelopes (with their stanza
// ids, so JetStream drops those that had arrived).
func (s *session) redial(ctx context.Context) error {
	c, err := dial(ctx, s.o.API)
	if err != nil {
		return err
	}
	s.conn = c
	s.configured = false // until the server confirms again; no input before
	if err := s.configure(ctx); err != nil {
		c.close(false)
		return err
	}
	cutoff := time.Now().Add(-resendWindow)
	for _, m := range s.outbox {
		if m.at.After(cutoff) {
			if err := c.send(ctx, m.env); err != nil {
				c.close(false)
				return err
			}
		}
	}
	return nil
}
