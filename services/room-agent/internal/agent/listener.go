package agent

import (
	"context"
	"sync"
	"time"

	"github.com/livekit/media-sdk"
	lkmedia "github.com/livekit/server-sdk-go/v2/pkg/media"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/services/room-agent/internal/vad"
)

// MetaUtteranceID links an input AudioChunk to the utterance (= user message) it recorded.
const MetaUtteranceID = "alicia.utterance_id"

// asrRate is the sample rate of ASR jobs.
const asrRate = 16000

// listener turns one user microphone track (decoded to 16 kHz mono) into
// ASR jobs, and tells the room when the user barges in.
type listener struct {
	r        *Room
	identity string
	trackSID string
	remote   *lkmedia.PCMRemoteTrack

	mu      sync.Mutex
	det     *vad.Detector
	utt     string // current utterance id
	seq     int32
	barged  bool
	onset   time.Time
	closed  bool
	prevTxt string
}

func newListener(r *Room, identity, trackSID string) (*listener, error) {
	cfg := r.cfg.VAD
	cfg.SampleRate = asrRate
	det, err := vad.New(cfg)
	if err != nil {
		return nil, err
	}
	return &listener{r: r, identity: identity, trackSID: trackSID, det: det}, nil
}

// WriteSample takes decoded user audio (lkmedia.PCMRemoteTrackWriter).
func (l *listener) WriteSample(s media.PCM16Sample) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.det.Push(s, l.onEvent)
	if l.det.InSpeech() && !l.barged && l.det.Speech() >= l.r.cfg.BargeInMin {
		l.barged = true
		l.r.turns.bargeIn(l.onset)
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
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	if l.remote != nil {
		l.remote.Close()
	}
}

func (l *listener) onEvent(ev vad.Event) {
	now := time.Now()
	switch ev.Kind {
	case vad.Start:
		l.utt, l.seq, l.barged = protocol.NewID("am"), 0, false
		l.onset = now.Add(-ev.Speech)
	case vad.Partial:
		l.job(ev.Audio, false, now)
	case vad.End:
		if l.utt == "" {
			return
		}
		l.r.turns.speechEnded(l.utt, now)
		l.job(ev.Audio, true, now)
		l.record(ev.Audio)
		l.utt = ""
	}
}

// job publishes an ASR job with the utterance so far; a final job carries
// when speech ended, for voice-to-voice timing.
func (l *listener) job(pcm []int16, final bool, now time.Time) {
	l.seq++
	cid := l.r.cid
	j := &protocol.ASRJob{ID: protocol.NewID("aj"), UtteranceID: l.utt, ConversationID: cid, Sequence: l.seq, Final: final,
		Format: audio.PCMFormat(asrRate), Data: audio.Bytes(pcm), DurationMs: int32(audio.FramesDuration(len(pcm), asrRate) / time.Millisecond),
		TrackSid: &l.trackSID, CreatedAt: now.UnixMilli()}
	if final {
		j.SpeechEndMs = protocol.Ptr(now.UnixMilli())
	}
	if l.r.cfg.Language != "" {
		j.Language = &l.r.cfg.Language
	}
	env := protocol.New(cid, j)
	env.Meta = map[string]any{edge.MetaUserID: l.r.userOr(l.identity)}
	data, err := protocol.Encode(env)
	if err != nil {
		l.r.log.Error().Err(err).Msg("encode ASR job")
		return
	}
	kind := "partial"
	if final {
		kind = "final"
	}
	l.r.d.Metrics.ASRJobs.WithLabelValues(kind).Inc()
	if !final {
		// Partials are best effort: a lost one is replaced by the next.
		if _, err := l.r.d.JS.PublishAsync(subjects.ASRJob(cid), data); err != nil {
			l.r.log.Warn().Err(err).Msg("publish partial ASR job")
		}
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(l.r.ctx, 5*time.Second)
		defer cancel()
		for attempt := 0; attempt < 3; attempt++ {
			if _, err = l.r.d.JS.Publish(ctx, subjects.ASRJob(cid), data); err == nil {
				return
			}
		}
		l.r.log.Error().Err(err).Str("utterance_id", j.UtteranceID).Msg("publish final ASR job")
	}()
}

// record stores the utterance's audio row (bytes only when configured).
func (l *listener) record(pcm []int16) {
	cid := l.r.cid
	c := &protocol.AudioChunk{ConversationID: cid, Format: audio.PCMFormat(asrRate), Sequence: 1,
		DurationMs: int32(audio.FramesDuration(len(pcm), asrRate) / time.Millisecond), TrackSid: &l.trackSID,
		IsLast: protocol.Ptr(true), Timestamp: protocol.Ptr(time.Now().UnixMilli())}
	if l.r.cfg.StoreAudio {
		c.Data = audio.Bytes(pcm)
	}
	env := protocol.New(cid, c)
	env.Meta = map[string]any{edge.MetaUserID: l.r.userOr(l.identity), MetaUtteranceID: l.utt}
	msgID := cid + ":audio:" + l.utt
	go func() {
		ctx, cancel := context.WithTimeout(l.r.ctx, 10*time.Second)
		defer cancel()
		if _, err := l.r.pub.PublishOnBehalf(ctx, env, msgID); err != nil {
			l.r.log.Error().Err(err).Msg("publish input audio record")
		}
	}()
}
