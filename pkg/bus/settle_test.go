package bus_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
)

// settleCase is one message on a consumer of its own, AckWait long enough
// that a redelivery within a test can only come from a nak.
type settleCase struct {
	t    *testing.T
	js   jetstream.JetStream
	cons jetstream.Consumer
	dlq  *bus.DeadLetters
	log  *syncBuffer
	s    *bus.Settler
}

func newSettleCase(t *testing.T, maxDeliver int) *settleCase {
	t.Helper()
	_, js, _ := setup(t)
	cid := protocol.NewID("ac")
	name := "settle-" + cid
	cons, err := js.CreateOrUpdateConsumer(t.Context(), bus.StreamConversations, jetstream.ConsumerConfig{
		Durable: name, AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute,
		FilterSubject: subjects.Conversation(cid),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(t.Context(), subjects.Client(cid, protocol.TypeUserMessage), []byte("payload")); err != nil {
		t.Fatal(err)
	}
	c := &settleCase{t: t, js: js, cons: cons, dlq: bus.NewDeadLetters(js), log: &syncBuffer{}}
	c.s = &bus.Settler{Consumer: name, DeadLetters: c.dlq, MaxDeliver: maxDeliver,
		Backoff: func(uint64) time.Duration { return 50 * time.Millisecond }, Log: zerolog.New(c.log)}
	return c
}

// next waits for the next delivery (a redelivery comes within a nak's delay).
func (c *settleCase) next() jetstream.Msg {
	c.t.Helper()
	m, err := c.cons.Next(jetstream.FetchMaxWait(10 * time.Second))
	if err != nil {
		c.t.Fatalf("no delivery: %v", err)
	}
	return m
}

// settled reports that the consumer holds nothing: no message pending or
// unacknowledged, delivered only `delivered` times.
func (c *settleCase) settled(delivered uint64) {
	c.t.Helper()
	testkit.Eventually(c.t, 5*time.Second, func() bool {
		info, err := c.cons.Info(c.t.Context())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.NumRedelivered == 0 &&
			info.Delivered.Consumer == delivered && info.AckFloor.Consumer == delivered
	}, "message not settled")
}

// deadLetters are the dead letters stored.
func (c *settleCase) deadLetters() []*jetstream.RawStreamMsg {
	c.t.Helper()
	st, err := c.js.Stream(c.t.Context(), bus.StreamDeadLetter)
	if err != nil {
		c.t.Fatal(err)
	}
	info, err := st.Info(c.t.Context())
	if err != nil {
		c.t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(c.t.Context(), seq)
		if err != nil {
			c.t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func TestSettleAckDone(t *testing.T) {
	c := newSettleCase(t, 3)
	o := c.s.Process(t.Context(), c.next(), func() error { return nil })
	if o.Verdict != bus.VerdictAck {
		t.Fatalf("verdict %v, want ack", o.Verdict)
	}
	c.settled(1)
	if dl := c.deadLetters(); len(dl) != 0 {
		t.Fatalf("%d dead letters after an ack", len(dl))
	}
}

// A retryable error naks with the back-off: the message comes again, long
// before AckWait, no sooner than the delay asked, counted as a new delivery.
func TestSettleRetryAfterBackoff(t *testing.T) {
	c := newSettleCase(t, 3)
	c.s.Backoff = func(attempt uint64) time.Duration { return time.Duration(attempt) * 200 * time.Millisecond }
	m := c.next()
	naked := time.Now()
	o := c.s.Process(t.Context(), m, func() error { return errors.New("database away") })
	if o.Verdict != bus.VerdictRetry || o.Delay != 200*time.Millisecond {
		t.Fatalf("outcome %+v, want a retry in 200ms", o)
	}
	again := c.next()
	if waited := time.Since(naked); waited < 200*time.Millisecond {
		t.Errorf("redelivered after %s, before the back-off of 200ms", waited)
	}
	if md, _ := again.Metadata(); md == nil || md.NumDelivered != 2 {
		t.Fatalf("redelivery metadata %+v", md)
	}
	c.s.Process(t.Context(), again, func() error { return nil })
	c.settled(2)
}

// A RetryAfter error asks for its own delay instead of the back-off.
func TestSettleRetryAfterAskedDelay(t *testing.T) {
	c := newSettleCase(t, 3)
	m := c.next()
	naked := time.Now()
	o := c.s.Process(t.Context(), m, func() error { return bus.Retry(errors.New("busy"), 400*time.Millisecond) })
	if o.Verdict != bus.VerdictRetry || o.Delay != 400*time.Millisecond {
		t.Fatalf("outcome %+v, want a retry in 400ms (not the 50ms back-off)", o)
	}
	again := c.next()
	if waited := time.Since(naked); waited < 400*time.Millisecond {
		t.Errorf("redelivered after %s, before the 400ms asked", waited)
	}
	c.s.Process(t.Context(), again, func() error { return nil })
	c.settled(2)
}

// A permanent failure is dead-lettered (original bytes, reason, where it
// came from) and terminated: never delivered again.
func TestSettlePermanentDeadLettered(t *testing.T) {
	c := newSettleCase(t, 3)
	o := c.s.Process(t.Context(), c.next(), func() error {
		return bus.Permanent(&protocol.Error{Code: protocol.CodeInvalidBody, Reason: "cannot apply"})
	})
	if o.Verdict != bus.VerdictFail {
		t.Fatalf("verdict %v, want fail", o.Verdict)
	}
	c.settled(1)
	dl := c.deadLetters()
	if len(dl) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dl))
	}
	h := dl[0].Header
	if string(dl[0].Data) != "payload" || !strings.Contains(h.Get(bus.HeaderDLQReason), "cannot apply") ||
		h.Get(bus.HeaderDLQConsumer) != c.s.Consumer || h.Get(bus.HeaderDLQStream) != bus.StreamConversations ||
		h.Get(bus.HeaderDLQCode) != "103" {
		t.Fatalf("dead letter %q headers %v", dl[0].Data, h)
	}
}

// The last allowed attempt fails for good whatever the error.
func TestSettleMaxDeliverDeadLetters(t *testing.T) {
	c := newSettleCase(t, 2)
	c.s.Process(t.Context(), c.next(), func() error { return errors.New("flaky") })
	o := c.s.Process(t.Context(), c.next(), func() error { return errors.New("flaky") })
	if o.Verdict != bus.VerdictFail {
		t.Fatalf("second attempt of 2: verdict %v, want fail", o.Verdict)
	}
	c.settled(2)
	if dl := c.deadLetters(); len(dl) != 1 || !strings.Contains(dl[0].Header.Get(bus.HeaderDLQReason), "flaky") {
		t.Fatalf("dead letters %v", dl)
	}
}

// A panic in the handler is a permanent failure: dead-lettered with the
// panic's value as reason, its stack logged, the process still running.
func TestSettlePanicDeadLettered(t *testing.T) {
	c := newSettleCase(t, 3)
	o := c.s.Process(t.Context(), c.next(), func() error { panic("boom") })
	if o.Verdict != bus.VerdictFail || !errors.Is(o.Err, bus.ErrPanic) || !errors.Is(o.Err, bus.ErrPermanent) {
		t.Fatalf("outcome %+v, want a permanent panic failure", o)
	}
	c.settled(1)
	dl := c.deadLetters()
	if len(dl) != 1 || !strings.Contains(dl[0].Header.Get(bus.HeaderDLQReason), "handler panic: boom") {
		t.Fatalf("dead letters %v", dl)
	}
	if log := c.log.String(); !strings.Contains(log, `"stack"`) || !strings.Contains(log, "settle_test.go") {
		t.Fatalf("the panic's stack was not logged: %s", log)
	}
}

// Without DeadLetters (a service that may not publish them) a failure is
// terminated with its reason only.
func TestSettleFailWithoutDeadLetters(t *testing.T) {
	c := newSettleCase(t, 3)
	c.s.DeadLetters = nil
	c.s.Process(t.Context(), c.next(), func() error { return bus.Permanent(errors.New("bad turn")) })
	c.settled(1)
	if dl := c.deadLetters(); len(dl) != 0 {
		t.Fatalf("%d dead letters without DeadLetters", len(dl))
	}
}

// Terminate settles a failure already dealt with: no dead letter, no redelivery.
func TestSettleTerminate(t *testing.T) {
	c := newSettleCase(t, 3)
	c.s.Settle(t.Context(), c.next(), bus.Terminate(errors.New("reported to the client")))
	c.settled(1)
	if dl := c.deadLetters(); len(dl) != 0 {
		t.Fatalf("%d dead letters after a terminate", len(dl))
	}
}

// A dead letter that cannot be stored leaves the message to be retried:
// it is never lost.
func TestSettleDeadLetterFailureRetries(t *testing.T) {
	c := newSettleCase(t, 3)
	s := natstest.Run(t)
	nc := natstest.Connect(t, s)
	c.s.DeadLetters = bus.NewDeadLetters(natstest.JetStream(t, nc)) // no DEADLETTER stream there
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	c.s.Settle(ctx, c.next(), bus.Fail(errors.New("poison")))
	again := c.next()
	if md, _ := again.Metadata(); md == nil || md.NumDelivered != 2 {
		t.Fatalf("not redelivered after the dead letter failed: %+v", md)
	}
	c.s.DeadLetters = c.dlq
	c.s.Settle(t.Context(), again, bus.Fail(errors.New("poison")))
	c.settled(2)
	if dl := c.deadLetters(); len(dl) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dl))
	}
}

// While stopping, a failure gives the message back at once for another
// replica, unless it is permanent.
func TestSettleGiveBackWhileStopping(t *testing.T) {
	c := newSettleCase(t, 3)
	stopping, stop := context.WithCancel(t.Context())
	stop()
	if o := c.s.Judge(stopping, bus.Permanent(errors.New("bad")), 1); o.Verdict != bus.VerdictFail {
		t.Errorf("permanent while stopping: verdict %v, want fail", o.Verdict)
	}
	if o := c.s.Judge(stopping, nil, 1); o.Verdict != bus.VerdictAck {
		t.Errorf("done while stopping: verdict %v, want ack", o.Verdict)
	}
	o := c.s.Process(stopping, c.next(), func() error { return context.Canceled })
	if o.Verdict != bus.VerdictGiveBack {
		t.Fatalf("verdict %v, want give back", o.Verdict)
	}
	again := c.next() // at once: no back-off
	if md, _ := again.Metadata(); md == nil || md.NumDelivered != 2 {
		t.Fatalf("given back message metadata %+v", md)
	}
	c.s.Settle(t.Context(), again, bus.Ack())
	c.settled(2)
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
