package agent

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/livekit/media-sdk"
	"github.com/livekit/media-sdk/opus"
	"github.com/pion/webrtc/v4"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/room-agent/internal/reorder"
)

// Playout runs at 48 kHz in 20 ms frames.
const (
	playRate = 48000
	frameDur = 20 * time.Millisecond
	frameLen = playRate / 50
)

// frame is 20 ms of one sentence's audio.
type frame struct {
	pcm      media.PCM16Sample
	turn     string
	sentence string
	seq      int32
	last     bool // last frame of the sentence
	final    bool // ... and the sentence is the turn's last
}

// PlayEvent tells the room what the player did.
type PlayEvent struct {
	Kind     PlayKind
	Turn     string
	Sentence string
	Seq      int32
	Played   time.Duration // of the sentence, for SentenceDone
	At       time.Time
}

// PlayKind of a PlayEvent.
type PlayKind int

// Play event kinds.
const (
	FirstFrame    PlayKind = iota + 1 // the turn's first frame went out
	SentenceDone                      // a sentence played to its end
	SentenceStart                     // a sentence's first frame went out
)

// Player plays TTS audio on the agent's track in turn order, at real time,
// and can pause, resume and stop at once. Sentence ids and played durations
// are reported through onEvent.
//
// Once Pause or Stop returns, no frame of what they cut goes out: the frame
// writer holds writeMu from its last look at the state to the end of the
// write, and both take it first. A frame is 20 ms, so the last one on the
// wire left at most one frame before the decision.
type Player struct {
	track   *webrtc.TrackLocalStaticSample
	enc     media.PCM16Writer
	onEvent func(PlayEvent)

	writeMu sync.Mutex

	mu       sync.Mutex
	wake     chan struct{}
	queue    []frame
	sent     []frame         // frames of the sentence being played taken so far (a Resume plays it again from its start)
	hold     bool            // paused: nothing plays until Resume or Stop
	gen      uint64          // bumped by Pause: a frame taken before is not written
	buf      *reorder.Buffer // turns and their chunks in play order; its current turn is the one playing
	rs       *audio.Resampler
	rsRate   int
	rsTurn   string        // the turn rs resamples (a new turn starts a new one)
	played   time.Duration // of the sentence being played
	playing  string        // sentence being played
	playSeq  int32
	lastTurn string
	gain     float64 // applied to each frame written: 1, or less while ducked
	// tap, when set, is given each frame as written (after the gain), with
	// when it went out: what the user's microphone may hear back (echo).
	tap func(pcm media.PCM16Sample, at time.Time)
}

// NewPlayer makes the agent's audio track.
func NewPlayer(onEvent func(PlayEvent)) (*Player, error) {
	track, err := webrtc.NewTrackLocalStaticSample(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeOpus, ClockRate: playRate, Channels: 2},
		"alicia-voice", "alicia-agent")
	if err != nil {
		return nil, err
	}
	enc, err := opus.Encode(media.FromSampleWriter[opus.Sample](track, playRate, frameDur), 1, nil)
	if err != nil {
		return nil, err
	}
	return &Player{track: track, enc: enc, onEvent: onEvent, wake: make(chan struct{}, 1), buf: reorder.New(), gain: 1}, nil
}

// Tap sets the function each written frame is given (before Run).
func (p *Player) Tap(f func(pcm media.PCM16Sample, at time.Time)) { p.tap = f }

// Duck lowers playout to db (negative) at once, whatever turn plays: the
// frame after it returns is the first at that level. It reports what
// plays, as Stop would (the played time goes on counting).
func (p *Player) Duck(db float64) Stopped {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gain = math.Pow(10, db/20)
	st := Stopped{Turn: p.buf.Current()}
	if p.playing != "" {
		st.Sentence, st.Seq, st.Played = p.playing, p.playSeq, p.played
	}
	return st
}

// Unduck puts playout back to its level.
func (p *Player) Unduck() {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	p.mu.Lock()
	p.gain = 1
	p.mu.Unlock()
}

// Track is the WebRTC track to publish.
func (p *Player) Track() *webrtc.TrackLocalStaticSample { return p.track }

// Add takes a chunk of synthesised speech.
func (p *Player) Add(sa *protocol.SpeechAudio) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.enqueueLocked(p.buf.Add(sa, time.Now()))
	p.signal()
}

// enqueueLocked turns chunks in play order (of the buffer's current turn)
// into frames at the track's rate.
func (p *Player) enqueueLocked(chunks []*protocol.SpeechAudio) {
	for _, sa := range chunks {
		p.enqueue1Locked(sa)
	}
}

func (p *Player) enqueue1Locked(sa *protocol.SpeechAudio) {
	turn := sa.MessageID
	rate, err := audio.ParsePCMFormat(sa.Format)
	if err != nil {
		return // not PCM: nothing to play (tts only sends PCM)
	}
	if p.rs == nil || p.rsRate != rate || p.rsTurn != turn {
		p.rs, _ = audio.NewResampler(rate, playRate)
		p.rsRate, p.rsTurn = rate, turn
	}
	pcm := p.rs.Process(nil, audio.Samples(sa.Data))
	if sa.Last {
		pcm = p.rs.Flush(pcm)
	}
	// Continue the previous partial frame of this sentence, if any.
	if n := len(p.queue); n > 0 {
		if f := &p.queue[n-1]; f.sentence == sa.SentenceID && len(f.pcm) < frameLen {
			fill := min(frameLen-len(f.pcm), len(pcm))
			f.pcm = append(f.pcm, pcm[:fill]...)
			pcm = pcm[fill:]
		}
	}
	for len(pcm) > 0 {
		n := min(frameLen, len(pcm))
		p.queue = append(p.queue, frame{pcm: append(media.PCM16Sample(nil), pcm[:n]...), turn: turn, sentence: sa.SentenceID, seq: sa.Sequence})
		pcm = pcm[n:]
	}
	if sa.Last && len(p.queue) > 0 && p.queue[len(p.queue)-1].sentence == sa.SentenceID {
		p.queue[len(p.queue)-1].last = true
		p.queue[len(p.queue)-1].final = sa.FinalSentence != nil && *sa.FinalSentence
	}
}

func (p *Player) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Busy reports whether a turn is playing or has audio waiting.
func (p *Player) Busy() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buf.Current() != "" && (len(p.queue) > 0 || p.playing != "")
}

// Stopped is what a Stop cut off.
type Stopped struct {
	Turn     string
	Sentence string        // the sentence cut in the middle ("" if between sentences)
	Seq      int32         //
	Played   time.Duration // of that sentence
}

// Stop ends playout of turn (the current one when empty) at once: queued
// audio is dropped and later chunks of the turn are ignored. It also ends a
// Pause.
func (p *Player) Stop(turn string) Stopped {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if turn == "" {
		turn = p.buf.Current()
	}
	if turn == "" {
		return Stopped{}
	}
	p.hold = false
	p.gain = 1 // a Duck ends with what it lowered
	st := Stopped{Turn: turn}
	wasCurrent := p.buf.Current() == turn
	// A frame of it taken before is not written (write looks).
	next := p.buf.Stop(turn, time.Now())
	if wasCurrent {
		if p.playing != "" {
			st.Sentence, st.Seq, st.Played = p.playing, p.playSeq, p.played
		}
		kept := p.queue[:0]
		for _, f := range p.queue {
			if f.turn != turn {
				kept = append(kept, f)
			}
		}
		p.queue = kept
		p.playing, p.played, p.sent = "", 0, nil
		p.enqueueLocked(next)
	}
	return st
}

// Pause holds playout at once, whatever turn plays: nothing is written
// until Resume or Stop. Audio keeps coming into the queue meanwhile. The
// sentence cut in the middle goes back to the queue whole, so a Resume
// plays it again from its start; Pause reports it as Stop would.
func (p *Player) Pause() Stopped {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hold = true
	p.gen++
	st := Stopped{Turn: p.buf.Current()}
	if p.playing != "" {
		st.Sentence, st.Seq, st.Played = p.playing, p.playSeq, p.played
		p.queue = append(p.sent, p.queue...)
	}
	p.sent, p.playing, p.played = nil, "", 0
	return st
}

// Resume ends a Pause: playout goes on from where it stood, the sentence
// cut in the middle from its start.
func (p *Player) Resume() {
	p.mu.Lock()
	p.hold = false
	p.mu.Unlock()
	p.signal()
}

// Run plays until ctx ends.
func (p *Player) Run(ctx context.Context) {
	var next time.Time // when the next frame is due; zero when idle
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		f, gen, ok, wait := p.pop()
		if !ok {
			next = time.Time{}
			if wait <= 0 {
				wait = time.Hour
			}
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-p.wake:
			case <-timer.C:
			}
			continue
		}
		now := time.Now()
		if next.IsZero() || now.Sub(next) > frameDur {
			next = now // start (or restart after an underrun) at once
		}
		if d := time.Until(next); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
		}
		if p.write(f, gen, next) {
			next = next.Add(frameDur)
		}
	}
}

// write puts f on the track unless a Pause or Stop came since it was taken
// (gen), and accounts it; due is when it was due (the tap's timeline: the
// schedule's, not a late wake-up's).
func (p *Player) write(f frame, gen uint64, due time.Time) bool {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	p.mu.Lock()
	ok := gen == p.gen && !p.hold && !p.buf.Stopped(f.turn)
	gain := p.gain
	p.mu.Unlock()
	if !ok {
		return false
	}
	pcm := f.pcm
	if len(pcm) < frameLen || gain != 1 {
		pcm = append(make(media.PCM16Sample, 0, frameLen), pcm...)
		pcm = pcm[:frameLen]
		if gain != 1 {
			for i, v := range pcm {
				pcm[i] = int16(float64(v) * gain)
			}
		}
	}
	_ = p.enc.WriteSample(pcm)
	if p.tap != nil {
		p.tap(pcm, due)
	}
	p.played1(f)
	return true
}

// pop takes the next frame to play, with the generation it was taken in;
// when there is none it says how long to wait before looking for a missing
// sentence to skip.
func (p *Player) pop() (frame, uint64, bool, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hold {
		return frame{}, 0, false, 0
	}
	if len(p.queue) == 0 {
		if wait := p.skipLocked(); len(p.queue) == 0 {
			return frame{}, 0, false, wait
		}
	}
	f := p.queue[0]
	p.queue = p.queue[1:]
	started := p.playing != f.sentence
	if started {
		p.playing, p.playSeq, p.played = f.sentence, f.seq, 0
		p.sent = p.sent[:0]
	}
	p.sent = append(p.sent, f)
	first := p.lastTurn != f.turn
	p.lastTurn = f.turn
	if p.onEvent != nil {
		now := time.Now()
		if first {
			p.onEvent(PlayEvent{Kind: FirstFrame, Turn: f.turn, Sentence: f.sentence, Seq: f.seq, At: now})
		}
		if started {
			p.onEvent(PlayEvent{Kind: SentenceStart, Turn: f.turn, Sentence: f.sentence, Seq: f.seq, At: now})
		}
	}
	return f, p.gen, true, 0
}

// skipLocked gives up on a sentence of the current turn whose audio has
// not come for reorder.DefaultSkipMissing while later audio waits (its
// synthesis failed); otherwise it says how long until it would.
func (p *Player) skipLocked() time.Duration {
	ready, wait := p.buf.Skip(time.Now())
	p.enqueueLocked(ready)
	return wait
}

// played1 accounts one frame written and reports a finished sentence.
func (p *Player) played1(f frame) {
	p.mu.Lock()
	var ev *PlayEvent
	if p.playing == f.sentence {
		p.played += frameDur
		if f.last {
			ev = &PlayEvent{Kind: SentenceDone, Turn: f.turn, Sentence: f.sentence, Seq: f.seq, Played: p.played, At: time.Now()}
			p.playing, p.played, p.sent = "", 0, p.sent[:0]
		}
	}
	if f.last && f.final && p.buf.Current() == f.turn {
		// The turn's last sentence is played: the next turn starts.
		p.enqueueLocked(p.buf.Finish(f.turn, time.Now()))
	}
	p.mu.Unlock()
	if ev != nil && p.onEvent != nil {
		p.onEvent(*ev)
	}
}
