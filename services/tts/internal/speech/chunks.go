package speech

import (
	"context"
	"time"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/services/tts/internal/synth"
)

// chunks cuts one sentence's PCM, as the backend streams it, into
// SpeechAudio envelopes on core NATS (no JetStream: playout must never
// queue behind storage). The first chunk goes out as soon as FirstChunk of
// audio is in (time to first audio), the others carry Chunk each; finish
// sends the rest marked last — possibly empty, when the audio ended on a
// chunk boundary or the sentence had nothing to say.
type chunks struct {
	t       *turn
	meta    map[string]any // of every chunk: the sentence's meta with the tts.sentence span (the parent of the room-agent's voice.playout)
	s       sentence
	final   bool
	startMs int64 // synthStartMs

	first, size int // bytes of the first and the other chunks
	buf         []byte
	next        int32 // index of the next chunk
	sent        int   // PCM bytes published
	all         []byte

	requested time.Time // synthesis request sent
	gotFirst  bool
}

func (t *turn) newChunks(ctx context.Context, s sentence, start time.Time) *chunks {
	bytesOf := func(d time.Duration) int { return max(2, int(d*synth.Rate/time.Second)*2) }
	return &chunks{
		t: t, meta: telemetry.InjectMeta(ctx, s.env.Meta), s: s, final: s.body.IsFinal != nil && *s.body.IsFinal, startMs: start.UnixMilli(),
		first: bytesOf(t.sp.s.FirstChunk), size: bytesOf(t.sp.s.Chunk),
	}
}

// write takes PCM from the backend (a synth.Emit).
func (c *chunks) write(p []byte) error {
	if !c.gotFirst {
		c.gotFirst = true
		c.t.sp.d.Metrics.FirstByte.WithLabelValues(c.t.sp.d.Synth.Engine()).Observe(time.Since(c.requested).Seconds())
	}
	c.buf = append(c.buf, p...)
	for {
		n := c.size
		if c.next == 0 {
			n = c.first
		}
		if len(c.buf) < n {
			return nil
		}
		if err := c.publish(c.buf[:n], false); err != nil {
			return err
		}
		c.buf = c.buf[:copy(c.buf, c.buf[n:])]
	}
}

// finish publishes what is left as the sentence's last chunk.
func (c *chunks) finish() error {
	return c.publish(c.buf[:len(c.buf)&^1], true)
}

func (c *chunks) publish(pcm []byte, last bool) error {
	t := c.t
	body := &protocol.SpeechAudio{
		ConversationID: t.cid, MessageID: t.id, SentenceID: c.s.id, Sequence: c.s.body.Sequence, Chunk: c.next,
		Format: t.sp.format, Data: pcm, Last: last, SynthStartMs: &c.startMs,
	}
	if c.final {
		body.FinalSentence = protocol.Ptr(true)
	}
	env := protocol.New(t.cid, body)
	env.Meta = c.meta // read only: shared by the sentence's chunks
	data, err := protocol.Encode(env)
	if err != nil {
		return err
	}
	t.mu.Lock()
	if t.halted {
		t.mu.Unlock()
		return ErrStopped
	}
	err = t.sp.d.NC.Publish(subjects.AudioOut(t.cid), data)
	t.mu.Unlock()
	if err != nil {
		return err
	}
	if c.next == 0 {
		t.pace.sentenceStarts()
		t.sp.d.Metrics.SentenceToAudio.Observe(time.Since(c.s.received).Seconds())
	}
	t.pace.played(audio.FramesDuration(len(pcm)/2, synth.Rate))
	if t.sp.s.StoreAudio {
		c.all = append(c.all, pcm...)
	}
	c.sent += len(pcm)
	c.next++
	return nil
}
