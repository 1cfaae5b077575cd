package turn

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
)

// outbox publishes a turn's server envelopes in order on its own goroutine,
// so the model stream is never held up by a JetStream round trip. Each
// envelope has a deterministic Nats-Msg-Id: a retried publish, or the same
// turn redone after a crash, is de-duplicated by JetStream.
type outbox struct {
	pub     *bus.Publisher
	ctx     context.Context // not ended by a stop; carries the turn's span
	timeout time.Duration
	items   chan outItem
	done    chan struct{}
	halted  atomic.Bool
	// published is told each envelope's PubAck (timings, the last sequence).
	published func(protocol.Envelope, *jetstream.PubAck)

	mu  sync.Mutex
	err error
}

type outItem struct {
	env   protocol.Envelope
	msgID string
	flush chan struct{}
}

func newOutbox(ctx context.Context, pub *bus.Publisher, timeout time.Duration, published func(protocol.Envelope, *jetstream.PubAck)) *outbox {
	o := &outbox{pub: pub, ctx: ctx, timeout: timeout, items: make(chan outItem, 256), done: make(chan struct{}), published: published}
	go o.loop()
	return o
}

// send queues env; it is published after everything queued before it.
func (o *outbox) send(env protocol.Envelope, msgID string) {
	if o.halted.Load() {
		return
	}
	o.items <- outItem{env: env, msgID: msgID}
}

// flush waits until everything queued so far is published (or dropped) and
// returns the first publish error.
func (o *outbox) flush() error {
	ch := make(chan struct{})
	o.items <- outItem{flush: ch}
	<-ch
	return o.failed()
}

// halt drops what is not published yet and everything sent later: after a
// stop nothing more reaches the client.
func (o *outbox) halt() { o.halted.Store(true) }

// close flushes and ends the goroutine.
func (o *outbox) close() error {
	err := o.flush()
	close(o.items)
	<-o.done
	return err
}

func (o *outbox) failed() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

func (o *outbox) loop() {
	defer close(o.done)
	for it := range o.items {
		if it.flush != nil {
			close(it.flush)
			continue
		}
		if o.halted.Load() || o.failed() != nil {
			continue
		}
		ack, err := o.publish(it)
		if err != nil {
			o.mu.Lock()
			o.err = err
			o.mu.Unlock()
			continue
		}
		if o.published != nil {
			o.published(it.env, ack)
		}
	}
}

// publish tries a few times with the same message id.
func (o *outbox) publish(it outItem) (*jetstream.PubAck, error) {
	var err error
	for attempt := range 4 {
		if attempt > 0 {
			select {
			case <-time.After(time.Duration(attempt*attempt) * 50 * time.Millisecond):
			case <-o.ctx.Done():
				return nil, errors.Join(err, o.ctx.Err())
			}
		}
		ctx, cancel := context.WithTimeout(o.ctx, o.timeout)
		var ack *jetstream.PubAck
		ack, err = o.pub.PublishServer(ctx, it.env, it.msgID)
		cancel()
		if err == nil {
			return ack, nil
		}
	}
	return nil, err
}
