package agent

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/livekit/media-sdk"
	"github.com/livekit/media-sdk/opus"
	"github.com/livekit/media-sdk/rtp"
	protoLogger "github.com/livekit/protocol/logger"
	"github.com/pion/webrtc/v4"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/services/room-agent/internal/echo"
	"github.com/alicia-voice/alicia/services/room-agent/internal/vad"
)

// asrRate is the sample rate of ASR jobs.
const asrRate = 16000

// echoTail: speech that begins this long after the agent's audio ended may
// still be its echo (a late path, a room's reverberation).
const echoTail = 2 * time.Second

// listener turns one user microphone track (decoded to 16 kHz mono) into
// ASR jobs, and tells the room when the user barges in.
type listener struct {
	r        *Room
	identity string
	trackSID string
	stop     func() // ends decoding

	// echo takes the agent's own audio out of the microphone's (echo.go).
	echo *echo.Canceller

	mu     sync.Mutex
	det    *vad.Detector
	utt    string // current utterance id
	seq    int32
	barged bool
	// overAnswer: the utterance began while an answer was spoken;
	// echoLike: some of its sound was like what was played.
	overAnswer, echoLike bool
	onset                time.Time
	closed               bool
	spec                 *speculation // the open utterance's speculative job (speculate.go)
	// partials: what each partial job of the open utterance carried (endofturn.go)
	partials partialJobs
	// handsFree is the conversation's mode now (handsfree.go);
	// uttHandsFree, the open utterance's, taken when it began.
	handsFree    atomic.Bool
	uttHandsFree bool
	stopFollow   context.CancelFunc
}

func newListener(r *Room, identity, trackSID string) (*listener, error) {
	cfg := r.cfg.VAD
	cfg.SampleRate = asrRate
	det, err := vad.New(cfg)
	if err != nil {
		return nil, err
	}
	ec, err := echo.New(playRate)
	if err != nil {
		det.Close()
		return nil, err
	}
	l := &listener{r: r, identity: identity, trackSID: trackSID, det: det, echo: ec}
	ctx, cancel := context.WithCancel(r.ctx)
	l.stopFollow = cancel
	// The mode is known before the first utterance can begin.
	first, cancelFirst := context.WithTimeout(ctx, 2*time.Second)
	l.readHandsFree(first)
	cancelFirst()
	go l.followHandsFree(ctx)
	return l, nil
}

// decode feeds the track's Opus packets, through a jitter buffer, to a
// decoder that produces 16 kHz directly (libopus decodes at any of its
// rates), so nothing is decoded at 48 kHz only to be resampled.
func (l *listener) decode(track *webrtc.TrackRemote) error {
	dec, err := opus.Decode(pcmIn{l}, 1, protoLogger.GetLogger())
	if err != nil {
		return err
	}
	h := rtp.HandleJitter(rtp.NewNopCloser(rtp.NewMediaStreamIn[opus.Sample](dec)))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = rtp.HandleLoop(track, h) // ends when the track does
		_ = dec.Close()
	}()
	l.stop = func() {
		_ = track.SetReadDeadline(time.Now())
		<-done
	}
	return nil
}

// pcmIn is the decoder's output: 16 kHz mono into the listener.
type pcmIn struct{ l *listener }

func (pcmIn) String() string                          { return "listener(16kHz)" }
func (pcmIn) SampleRate() int                         { return asrRate }
func (p pcmIn) WriteSample(s media.PCM16Sample) error { return p.l.WriteSample(s) }
func (p pcmIn) Close() error                          { return p.l.Close() }

// WriteSample takes decoded user audio.
func (l *listener) WriteSample(s media.PCM16Sample) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	// Without the answer's echo: what the person says over it stays.
	l.det.Push(l.echo.Process(s, time.Now()), l.onEvent)
	if l.utt != "" && !l.echoLike && l.det.InSpeech() && l.echo.EchoLike() {
		l.echoLike = true
		l.r.turns.noteEchoLike(l.utt)
	}
	// Speech with its short gaps (the onset hangover), as the minimum
	// speech that started the utterance was counted.
	if l.det.InSpeech() && !l.barged && l.det.SpeechBridged() >= l.r.cfg.BargeInMin {
		l.barged = true
		l.r.turns.bargeIn(l.utt, l.onset)
	}
	return nil
}

// Close ends the stream (lkmedia.PCMRemoteTrackWriter).
func (l *listener) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.det.Flush(l.onEvent)
	}
	return nil
}

func (l *listener) close() {
	l.stopFollow()
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	if l.stop != nil {
		l.stop()
	}
	l.mu.Lock()
	l.det.Close() // the model's state of the stream
	l.mu.Unlock()
}

func (l *listener) onEvent(ev vad.Event) {
	now := time.Now()
	switch ev.Kind {
	case vad.Start:
		l.utt, l.seq, l.barged, l.echoLike = protocol.NewID("am"), 0, false, false
		l.uttHandsFree = l.handsFree.Load() && len(l.r.cfg.WakeWords) > 0
		// Its words may be the answer's echo: while it is spoken, and for
		// echoTail after (the echo of its last words).
		l.overAnswer = l.r.turns.speaking() || now.Sub(l.echo.LastPlayed()) < echoTail
		l.onset = now.Add(-ev.Speech)
	case vad.Partial:
		if l.spec == nil { // a speculative job covers the speech so far
			l.job(ev.Audio, false, now, nil, false, false)
		}
	case vad.Pause:
		l.speculate(ev.Audio, ev.Voiced, now)
	case vad.Resume:
		l.unspeculate(now)
	case vad.End:
		if l.utt == "" {
			return
		}
		spec := l.confirm()
		if spec == nil && (l.barged || l.overAnswer) && !l.r.cfg.NoSpeculation {
			// Said over an answer with no speculation covering it (no
			// pause in it): its transcript is asked for now, so that its
			// words decide (an echo, a backchannel) before it can become a
			// user message. (With speculation off, the asr transcribes
			// the final job as before.)
			l.speculateAll(ev.Audio, len(ev.Audio), now)
			spec = l.confirm()
		}
		l.job(ev.Audio, true, now, spec, l.barged, l.barged || l.overAnswer) // notes the end of speech (speechEnded)
		l.record(ev.Audio)
		l.utt = ""
	}
}

// job publishes an ASR job with the utterance so far; a final job carries
// when speech ended, for voice-to-voice timing, and the transcript of its
// speculative job (spec) when that covered all of its speech. A final job
// of an utterance said over an answer (overAnswer) whose transcript is the
// answer's own echo, or, when it barged in, a backchannel, says so: it
// becomes no user message.
func (l *listener) job(pcm []byte, final bool, now time.Time, spec *speculation, barged, overAnswer bool) {
	l.seq++
	cid := l.r.cid
	j := &protocol.ASRJob{ID: protocol.NewID("aj"), UtteranceID: l.utt, ConversationID: cid, Sequence: l.seq, Final: final,
		Format: audio.PCMFormat(asrRate), Data: pcm, DurationMs: int32(audio.FramesDuration(len(pcm)/2, asrRate) / time.Millisecond),
		TrackSid: &l.trackSID, CreatedAt: now.UnixMilli()}
	if final {
		j.SpeechEndMs = protocol.Ptr(now.UnixMilli())
	}
	j.WakeWords = l.wakeWords()
	if l.r.cfg.Language != "" {
		j.Language = &l.r.cfg.Language
	}
	env := protocol.New(cid, j)
	env.Meta = map[string]any{edge.MetaUserID: l.r.userOr(l.identity)}
	if final {
		l.r.d.Metrics.ASRJobs.WithLabelValues("final").Inc()
		// A spoken turn's trace starts here, at the end of the user's
		// speech: the asr's job, the llm's turn and the tts's sentences
		// join it through the envelopes' meta. After a speculation (a
		// silence that began inside the utterance) the speculation's trace
		// goes on instead: the end of speech is its child, so an answer
		// started speculatively is in the turn's trace.
		opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer),
			trace.WithTimestamp(now), trace.WithAttributes(attribute.String("alicia.conversation_id", cid),
				attribute.String("alicia.utterance_id", j.UtteranceID), attribute.Int("alicia.speech_ms", int(j.DurationMs)),
				attribute.Bool("alicia.speculated", spec != nil))}
		parent := l.r.ctx
		if sc := spec.context(); sc.IsValid() {
			parent = trace.ContextWithSpanContext(l.r.ctx, sc)
		} else {
			opts = append(opts, trace.WithNewRoot())
		}
		_, span := tracer.Start(parent, "voice.end_of_speech", opts...)
		env.Meta = telemetry.InjectMeta(trace.ContextWithSpan(context.Background(), span), env.Meta)
		// The turn's voice.turn (end of speech to first frame) hangs under it.
		l.r.turns.speechEnded(j.UtteranceID, now, span.SpanContext())
		go func() {
			defer span.End()
			if spec != nil {
				wait := specWait
				if overAnswer {
					wait = overAnswerSpecWait
				}
				if text, conf, ok := l.r.finalTranscript(spec, wait); ok {
					j.Transcript, j.TranscriptConfidence = &text, conf
					if overAnswer {
						switch l.r.turns.Overheard(j.UtteranceID, text, barged) {
						case heardBackchannel:
							j.Backchannel = protocol.Ptr(true)
							l.r.cancelPreempt(spec, "backchannel", time.Now())
						case heardEcho:
							j.Echo = protocol.Ptr(true)
							l.r.cancelPreempt(spec, "echo", time.Now())
						}
					}
				}
			}
			l.publishFinal(env, j.UtteranceID)
		}()
		return
	}
	data, err := protocol.Encode(env)
	if err != nil {
		l.r.log.Error().Err(err).Msg("encode ASR job")
		return
	}
	l.partials.sent(l.utt, j.ID, len(pcm))
	l.r.d.Metrics.ASRJobs.WithLabelValues("partial").Inc()
	// Partials are best effort: a lost one is replaced by the next.
	if _, err := l.r.d.JS.PublishAsync(subjects.ASRJob(cid), data); err != nil {
		l.r.log.Warn().Err(err).Msg("publish partial ASR job")
	}
}

var tracer = otel.Tracer("github.com/alicia-voice/alicia/services/room-agent")

// publishFinal publishes a final ASR job, with retries.
func (l *listener) publishFinal(env protocol.Envelope, utt string) {
	data, err := protocol.Encode(env)
	if err != nil {
		l.r.log.Error().Err(err).Msg("encode ASR job")
		return
	}
	ctx, cancel := context.WithTimeout(l.r.ctx, 5*time.Second)
	defer cancel()
	for attempt := 0; attempt < 3; attempt++ {
		if _, err = l.r.d.JS.Publish(ctx, subjects.ASRJob(env.ConversationID), data); err == nil {
			return
		}
	}
	l.r.log.Error().Err(err).Str("utterance_id", utt).Msg("publish final ASR job")
}

// record stores the utterance's audio row (bytes only when configured).
func (l *listener) record(pcm []byte) {
	cid := l.r.cid
	c := &protocol.AudioChunk{ConversationID: cid, Format: audio.PCMFormat(asrRate), Sequence: 1,
		DurationMs: int32(audio.FramesDuration(len(pcm)/2, asrRate) / time.Millisecond), TrackSid: &l.trackSID,
		IsLast: protocol.Ptr(true), Timestamp: protocol.Ptr(time.Now().UnixMilli())}
	if l.r.cfg.StoreAudio {
		c.Data = pcm
	}
	env := protocol.New(cid, c)
	env.Meta = map[string]any{edge.MetaUserID: l.r.userOr(l.identity), edge.MetaUtteranceID: l.utt}
	msgID := cid + ":audio:" + l.utt
	publish := func() {
		go func() {
			ctx, cancel := context.WithTimeout(l.r.ctx, 10*time.Second)
			defer cancel()
			if _, err := l.r.pub.PublishOnBehalf(ctx, env, msgID); err != nil {
				l.r.log.Error().Err(err).Msg("publish input audio record")
			}
		}()
	}
	if l.uttHandsFree {
		// Stored only once the utterance is known to be addressed.
		l.r.turns.held.hold(l.utt, publish)
		return
	}
	publish()
}
