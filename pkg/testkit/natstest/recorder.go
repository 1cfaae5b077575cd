package natstest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// Seen is one message a Recorder took: its envelope, or Err when it was not
// one.
type Seen struct {
	// Seq is the stream sequence (0 for core NATS).
	Seq     uint64
	Subject string
	Header  nats.Header
	// At is when the recorder took it.
	At  time.Time
	Env protocol.Envelope
	// Err is why the message did not decode (Env is then empty).
	Err error
}

// Recorder is the one envelope recorder of every service's tests: it takes
// every message of a stream under its filters, in stream order (an ordered
// consumer from the first message stored), or of core-NATS subjects, in
// arrival order, and decodes each. A message that is not an envelope is
// kept with its Err: the test fails at cleanup unless it said it expects
// some (AllowUndecodable).
type Recorder struct {
	mu             sync.Mutex
	seen           []Seen
	allowUndecoded bool
}

func newRecorder(t testing.TB) *Recorder {
	r := &Recorder{}
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.allowUndecoded {
			return
		}
		for _, s := range r.seen {
			if s.Err != nil {
				t.Errorf("recorded a message on %s that is not an envelope: %v", s.Subject, s.Err)
			}
		}
	})
	return r
}

func (r *Recorder) take(s Seen) {
	s.At = time.Now()
	r.mu.Lock()
	r.seen = append(r.seen, s)
	r.mu.Unlock()
}

func seen(subject string, header nats.Header, data []byte) Seen {
	env, err := protocol.Decode(data)
	return Seen{Subject: subject, Header: header, Env: env, Err: err}
}

// Record records every envelope stored on stream under filters (all of the
// stream when none), from the first one, until the test ends.
func Record(t testing.TB, js jetstream.JetStream, stream string, filters ...string) *Recorder {
	t.Helper()
	r := newRecorder(t)
	cons, err := js.OrderedConsumer(context.Background(), stream, jetstream.OrderedConsumerConfig{FilterSubjects: filters})
	if err != nil {
		t.Fatalf("record %s %v: %v", stream, filters, err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		s := seen(m.Subject(), m.Headers(), m.Data())
		if md, err := m.Metadata(); err == nil {
			s.Seq = md.Sequence.Stream
		}
		r.take(s)
	})
	if err != nil {
		t.Fatalf("record %s %v: %v", stream, filters, err)
	}
	t.Cleanup(cc.Stop)
	return r
}

// RecordCore records every envelope published on the core-NATS subjects
// from now until the test ends (the subscriptions are flushed before it
// returns, so nothing published afterwards is missed).
func RecordCore(t testing.TB, nc *nats.Conn, subjects ...string) *Recorder {
	t.Helper()
	r := newRecorder(t)
	for _, subject := range subjects {
		sub, err := nc.Subscribe(subject, func(m *nats.Msg) { r.take(seen(m.Subject, m.Header, m.Data)) })
		if err != nil {
			t.Fatalf("record %s: %v", subject, err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return r
}

// AllowUndecodable says the test publishes messages that are not
// envelopes on purpose: they are kept (with Err) and fail nothing.
func (r *Recorder) AllowUndecodable() *Recorder {
	r.mu.Lock()
	r.allowUndecoded = true
	r.mu.Unlock()
	return r
}

// All is everything taken so far, undecodable messages included.
func (r *Recorder) All() []Seen {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Seen(nil), r.seen...)
}

// Envelopes are the envelopes taken so far, in order.
func (r *Recorder) Envelopes() []protocol.Envelope { return Envelopes(r.All()) }

// Until waits up to timeout for cond over everything taken so far and
// returns what it held then; the test fails with what when it never holds.
func (r *Recorder) Until(t testing.TB, timeout time.Duration, what string, cond func([]Seen) bool) []Seen {
	t.Helper()
	var last []Seen
	testkit.Eventually(t, timeout, func() bool { last = r.All(); return cond(last) }, "%s", what)
	return last
}

// Envelopes are the decoded envelopes of seen, in order.
func Envelopes(seen []Seen) []protocol.Envelope {
	out := make([]protocol.Envelope, 0, len(seen))
	for _, s := range seen {
		if s.Err == nil {
			out = append(out, s.Env)
		}
	}
	return out
}

// Bodies are the bodies of type T in seen, in order.
func Bodies[T protocol.Body](seen []Seen) []T {
	var out []T
	for _, s := range seen {
		if b, ok := s.Env.Body.(T); ok && s.Err == nil {
			out = append(out, b)
		}
	}
	return out
}

// Stored reads what stream holds under filters now: every envelope up to
// the last one stored when it is called, in stream order. An undecodable
// message fails the test.
func Stored(t testing.TB, js jetstream.JetStream, stream string, filters ...string) []protocol.Envelope {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: filters})
	if err != nil {
		t.Fatalf("read %s %v: %v", stream, filters, err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatalf("read %s %v: %v", stream, filters, err)
	}
	var out []protocol.Envelope
	for pending := info.NumPending; pending > 0; pending-- {
		m, err := cons.Next(jetstream.FetchContext(ctx))
		if err != nil {
			t.Fatalf("read %s %v: %d message(s) left: %v", stream, filters, pending, err)
		}
		env, err := protocol.Decode(m.Data())
		if err != nil {
			t.Fatalf("read %s %v: %s is not an envelope: %v", stream, filters, m.Subject(), err)
		}
		out = append(out, env)
	}
	return out
}
