package speech

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// streamReader reads one subject of CONVERSATIONS from a stream sequence on,
// through an ephemeral consumer with that single filter: the tts's NATS user
// may create consumers on CONVERSATIONS only with the filters it uses, so it
// reads nothing of a conversation but the turn's own subject. The consumer
// is created on the first read, kept for the turn (each read takes what was
// stored since the previous one) and deleted by close. It lives in memory
// and, should the tts die before close, the server removes it after
// readerIdle without reads.
type streamReader struct {
	stream jetstream.Stream
	filter string
	from   uint64 // the next stream sequence to read
	cons   jetstream.Consumer
	name   string
}

const (
	// readerBatch is how many messages one fetch asks for.
	readerBatch = 256
	// readerIdle is how long the server keeps a reader's consumer without
	// reads (a turn that goes quiet reads every quietCheck).
	readerIdle = 2 * time.Minute
)

func newStreamReader(stream jetstream.Stream, filter string, from uint64) *streamReader {
	if from == 0 {
		from = 1
	}
	return &streamReader{stream: stream, filter: filter, from: from}
}

// read calls fn with every message stored on the subject since the last
// read, in order.
func (r *streamReader) read(ctx context.Context, fn func(jetstream.Msg, *jetstream.MsgMetadata) error) error {
	for attempt := 0; ; attempt++ {
		if r.cons == nil {
			if err := r.open(ctx); err != nil {
				return err
			}
		}
		err := r.drain(ctx, fn)
		if err == nil {
			return nil
		}
		// The server dropped the consumer (idle too long, a restart of an
		// R1 memory consumer's server): open a new one where this left off.
		if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrNoHeartbeat) {
			if attempt == 0 {
				r.cons = nil
				continue
			}
		}
		return err
	}
}

func (r *streamReader) open(ctx context.Context) error {
	r.name = "tts_" + nuid.Next()
	cons, err := r.stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
		Name:              r.name,
		FilterSubject:     r.filter,
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       r.from,
		AckPolicy:         jetstream.AckNonePolicy,
		MemoryStorage:     true,
		Replicas:          1,
		InactiveThreshold: readerIdle,
	})
	if err != nil {
		return fmt.Errorf("tts: reader for %s: %w", r.filter, err)
	}
	r.cons = cons
	return nil
}

// drain fetches until the consumer has nothing more.
func (r *streamReader) drain(ctx context.Context, fn func(jetstream.Msg, *jetstream.MsgMetadata) error) error {
	for {
		batch, err := r.cons.FetchNoWait(readerBatch)
		if err != nil {
			return err
		}
		n := 0
		var last *jetstream.MsgMetadata
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			last = md
			r.from = md.Sequence.Stream + 1
			if err := fn(m, md); err != nil {
				return err
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return err
		}
		if n < readerBatch || last == nil || last.NumPending == 0 {
			return ctx.Err()
		}
	}
}

// close deletes the consumer, off the turn's path.
func (r *streamReader) close() {
	if r.cons == nil {
		return
	}
	stream, name := r.stream, r.name
	r.cons = nil
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = stream.DeleteConsumer(ctx, name)
	}()
}
