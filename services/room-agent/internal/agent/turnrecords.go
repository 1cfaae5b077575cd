package agent

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// What the tracker tells of the playout: SentencePlayout records on the
// stream (in order, off the audio paths) and live marks on the room's data
// channel.

func (t *tracker) publishLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			t.endPlayout("", "", playoutUnfinished, 0, time.Now()) // the room closed mid-sentence
			return
		case f := <-t.records:
			f(ctx)
		}
	}
}

// markLoop sends the live playout marks to the room's participants.
func (t *tracker) markLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case frame := <-t.marks:
			if err := t.r.broadcast(frame); err != nil {
				t.r.log.Debug().Err(err).Msg("playout mark")
			}
		}
	}
}

// mark tells the room's participants what happens to a sentence's audio
// (SentencePlayout on the data channel, not stored): they show which
// sentence is heard and, after a barge-in, what was not. A full queue drops
// the mark: it is a view, the record on the stream is the truth.
func (t *tracker) mark(turnID, sentenceID string, seq int32, status protocol.SentencePlayoutStatus, played time.Duration) {
	cid := t.r.cid
	frame, err := protocol.Encode(protocol.New(cid, &protocol.SentencePlayout{ConversationID: cid, MessageID: turnID, SentenceID: sentenceID,
		Sequence: seq, Status: status, PlayedMs: int32(played / time.Millisecond)}))
	if err != nil {
		return
	}
	select {
	case t.marks <- frame:
	default:
	}
}

func (t *tracker) enqueue(f func(context.Context)) {
	t.unrecorded.Add(1)
	wrapped := func(ctx context.Context) {
		defer t.unrecorded.Add(-1)
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		f(ctx)
	}
	select {
	case t.records <- wrapped:
	default: // a full queue means JetStream is stuck: publish beside it rather than block audio
		go wrapped(t.r.ctx)
	}
}

// record publishes a SentencePlayout. Records go out in order, within
// milliseconds, long before the user's next message (which waits for the
// end-pointing silence and the transcription) is published. sc, the
// sentence's voice.playout span (or a span of its turn), goes into its meta:
// persistence stores it in the turn's trace.
func (t *tracker) record(turnID string, s *sentence, status protocol.SentencePlayoutStatus, played time.Duration, sc trace.SpanContext) {
	t.mark(turnID, s.id, s.seq, status, played)
	cid := t.r.cid
	env := protocol.New(cid, &protocol.SentencePlayout{ConversationID: cid, MessageID: turnID, SentenceID: s.id, Sequence: s.seq,
		Status: status, PlayedMs: int32(played / time.Millisecond)})
	t.enqueue(func(ctx context.Context) {
		if _, err := t.r.pub.PublishAgent(withSpan(ctx, sc), env, s.id+":playout"); err != nil {
			t.r.log.Error().Err(err).Str("sentence_id", s.id).Msg("publish SentencePlayout")
		}
	})
}
