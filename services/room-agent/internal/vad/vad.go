// Package vad finds speech in 16 kHz mono PCM: a neural detector (the
// Silero VAD on ONNX Runtime, silero.go) or, without its runtime, an energy
// detector with an adaptive noise floor; and an end-pointer that turns
// their decisions into utterances (start, partial snapshots, end) with
// configurable minimum speech, end-of-turn silence, pre-roll and maximum
// length.
package vad

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/alicia-voice/alicia/pkg/audio"
)

// Config tunes detection and end-pointing. Zero values take the defaults.
type Config struct {
	SampleRate int           // default 16000
	Frame      time.Duration // analysis frame, default 20 ms (the model's window, 32 ms, with Model)
	// Model, when set, decides speech: a frame is speech when the model's
	// probability is at least Threshold, and stays speech down to
	// NegThreshold (hysteresis). Without it, the energy detector does
	// (MarginDB, MinLevelDB). The sample rate must be SileroRate.
	Model *Silero
	// Threshold (default 0.5) and NegThreshold (default Threshold - 0.15).
	Threshold, NegThreshold float64
	// MarginDB: a frame is speech when its level is this far above the noise floor (default 12).
	MarginDB float64
	// MinLevelDB: quieter frames are never speech (default -50 dBFS).
	MinLevelDB float64
	// MinSpeech of speech starts an utterance (default 150 ms).
	MinSpeech time.Duration
	// EndSilence of silence ends it (default 500 ms).
	EndSilence time.Duration
	// PreRoll is audio kept from before the detected start (default 300 ms).
	PreRoll time.Duration
	// MaxUtterance ends an utterance that goes on (default 25 s).
	MaxUtterance time.Duration
	// PartialEvery emits a Partial snapshot while speech goes on (default 500 ms; negative: never).
	PartialEvery time.Duration
	// PauseAfter of silence inside an utterance emits Pause, once per
	// silence, and the next speech frame Resume (default 100 ms; negative:
	// never). The room-agent transcribes the utterance at a Pause, so the
	// transcript is ready when the silence ends the turn.
	PauseAfter time.Duration
	// OnsetHangover: gaps of at most this much silence between speech
	// frames count as speech while the minimum speech is counted (a stop
	// consonant, "wh|at"), instead of starting the count again (default
	// 60 ms; negative: none). Speech (the barge-in count) bridges them too.
	OnsetHangover time.Duration
}

// ErrConfig is returned for impossible settings.
var ErrConfig = errors.New("vad: bad config")

func (c Config) withDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if c.SampleRate == 0 {
		c.SampleRate = 16000
	}
	if c.Model != nil {
		c.Frame = time.Duration(SileroWindow) * time.Second / SileroRate
		if c.Threshold == 0 {
			c.Threshold = 0.5
		}
		if c.NegThreshold == 0 {
			c.NegThreshold = max(c.Threshold-0.15, 0.01)
		}
	}
	def(&c.Frame, 20*time.Millisecond)
	def(&c.MinSpeech, 150*time.Millisecond)
	def(&c.EndSilence, 500*time.Millisecond)
	def(&c.PreRoll, 300*time.Millisecond)
	def(&c.MaxUtterance, 25*time.Second)
	def(&c.PartialEvery, 500*time.Millisecond)
	def(&c.PauseAfter, 100*time.Millisecond)
	def(&c.OnsetHangover, 60*time.Millisecond)
	if c.MarginDB == 0 {
		c.MarginDB = 12
	}
	if c.MinLevelDB == 0 {
		c.MinLevelDB = -50
	}
	return c
}

// Validate reports impossible settings.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.SampleRate < 8000 {
		errs = append(errs, errors.New("sample rate below 8 kHz"))
	}
	if c.Frame < 5*time.Millisecond || c.Frame > 100*time.Millisecond {
		errs = append(errs, errors.New("frame must be 5-100 ms"))
	}
	if c.MinSpeech < c.Frame || c.EndSilence < c.Frame {
		errs = append(errs, errors.New("minimum speech and end silence must be at least one frame"))
	}
	if c.MaxUtterance <= c.MinSpeech {
		errs = append(errs, errors.New("maximum utterance must exceed minimum speech"))
	}
	if c.Model != nil {
		if c.SampleRate != SileroRate {
			errs = append(errs, errors.New("the neural VAD runs at 16 kHz"))
		}
		if c.Threshold <= 0 || c.Threshold >= 1 || c.NegThreshold <= 0 || c.NegThreshold > c.Threshold {
			errs = append(errs, errors.New("the speech threshold must be in (0, 1) and the negative one in (0, threshold]"))
		}
	}
	if len(errs) > 0 {
		return errors.Join(append([]error{ErrConfig}, errs...)...)
	}
	return nil
}

// Kind of an Event.
type Kind int

// Event kinds.
const (
	Start   Kind = iota + 1 // speech began (Audio: pre-roll and speech so far)
	Partial                 // speech goes on (Audio: the utterance so far)
	End                     // end of the user's turn (Audio: the whole utterance)
	Pause                   // a silence began inside the utterance (Audio: the utterance so far; Voiced: up to its last speech)
	Resume                  // speech again after a Pause (Audio: nil)
)

func (k Kind) String() string {
	switch k {
	case Start:
		return "start"
	case Partial:
		return "partial"
	case End:
		return "end"
	case Pause:
		return "pause"
	case Resume:
		return "resume"
	}
	return "unknown"
}

// Event is what the end-pointer decided after a frame.
type Event struct {
	Kind Kind
	// Audio is the utterance from its pre-roll as little-endian 16-bit PCM
	// (what ASR jobs carry, so it is never converted again); the slice is the
	// detector's own for Start and Partial (copy it to keep it), and handed
	// over for End.
	Audio []byte
	// Speech is how long the utterance has had speech frames.
	Speech time.Duration
	// Forced: End because the utterance reached MaxUtterance.
	Forced bool
	// Voiced is the length of Audio (bytes) up to the end of its last
	// speech frame (Pause).
	Voiced int
}

// Detector is the VAD and end-pointer of one audio stream. Not safe for
// concurrent use.
type Detector struct {
	cfg           Config
	neural        *SileroStream // with cfg.Model
	prob          float32       // the model's last probability
	rise          time.Duration // windows in a row whose probability is rising (≥ riseThreshold), before speech
	credit        time.Duration // rising windows to count as speech with the voiced window that follows them
	energyRun     time.Duration // frames in a row above the noise floor's margin (the energy's verdict, whichever decides)
	lead          time.Duration // the energy's onset before the model's first voiced window of the run (less the credit; SpeechBridged)
	err           error         // the model failed (the energy decides from then on)
	frameN        int
	pending       []int16 // samples of an incomplete frame
	floor         float64 // noise floor, dBFS
	primed        bool
	pre           []int16 // ring of pre-roll samples while idle (kept as a sliding slice)
	preMax        int
	inSpeech      bool
	utt           []byte        // little-endian PCM
	voiced        time.Duration // voiced run before start (bridged gaps included) / speech total after
	gap           time.Duration // silence since the last speech frame of the run before start
	bridged       time.Duration // gaps of at most OnsetHangover bridged inside the utterance
	silence       time.Duration
	lastVoicedEnd int // utt length (bytes) at the end of the last voiced frame
	sincePartial  time.Duration
	paused        bool          // Pause emitted for the current silence
	endSilence    time.Duration // set for the open utterance by its transcript (0: none; endpoint.go)
	endHeard      int           // utt bytes the transcript behind endSilence heard
	speaking      bool          // last frame voiced
	blocks        []float64
	blockMin      float64
	blockFrames   int
}

// New returns a detector.
func New(cfg Config) (*Detector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	n := int(int64(cfg.SampleRate) * int64(cfg.Frame) / int64(time.Second))
	d := &Detector{cfg: cfg, frameN: n, floor: -70, preMax: int(int64(cfg.SampleRate) * int64(cfg.PreRoll) / int64(time.Second))}
	if cfg.Model != nil {
		st, err := cfg.Model.Stream()
		if err != nil {
			return nil, fmt.Errorf("vad: neural stream: %w", err)
		}
		d.neural = st
	}
	return d, nil
}

// Close frees the model's state of the stream.
func (d *Detector) Close() {
	if d.neural != nil {
		d.neural.Close()
		d.neural = nil
	}
}

// Neural reports whether the model decides (false: the energy detector).
func (d *Detector) Neural() bool { return d.neural != nil && d.err == nil }

// Prob is the model's speech probability of the last frame (0 without it).
func (d *Detector) Prob() float32 { return d.prob }

// Err is the model's failure, if it failed (the energy detector took over).
func (d *Detector) Err() error { return d.err }

// InSpeech reports whether an utterance is open.
func (d *Detector) InSpeech() bool { return d.inSpeech }

// Speech is how long the open utterance has had speech frames (0 when none is open).
func (d *Detector) Speech() time.Duration {
	if !d.inSpeech {
		return 0
	}
	return d.voiced
}

// SpeechBridged is Speech with the gaps of at most OnsetHangover between
// its speech frames counted as speech: how long the user has been talking,
// the count barge-in waits for. With the model it counts from where the
// level rose, when that was at most leadMax before the model's first speech
// window of the utterance: the model is sure 60–100 ms after a word begins,
// and barge-in is timed from the word's start (the model still decides that
// it is speech: noise that raises the level starts nothing).
func (d *Detector) SpeechBridged() time.Duration {
	if !d.inSpeech {
		return 0
	}
	return d.voiced + d.bridged + d.lead + d.pendingSpeech()
}

// pendingSpeech is the part of the model's next window already received
// (it decides per 32 ms; the microphone sends 20 ms frames) while the
// person speaks: counted when the model's last window was speech and the
// samples are as loud as speech, so barge-in is timed to the frame as the
// energy detector's is.
func (d *Detector) pendingSpeech() time.Duration {
	if !d.Neural() || !d.speaking || len(d.pending) == 0 {
		return 0
	}
	if audio.DBFS(d.pending) <= max(d.floor+d.cfg.MarginDB, d.cfg.MinLevelDB)-3 {
		return 0
	}
	return audio.FramesDuration(len(d.pending), d.cfg.SampleRate)
}

// Push analyses samples and calls emit for each decision, in order.
func (d *Detector) Push(samples []int16, emit func(Event)) {
	d.pending = append(d.pending, samples...)
	for len(d.pending) >= d.frameN {
		frame := d.pending[:d.frameN]
		d.frame(frame, emit)
		d.pending = d.pending[d.frameN:]
	}
	if len(d.pending) == 0 {
		d.pending = d.pending[:0:0] // let the backing array go
	}
}

// Flush ends an open utterance (the stream stopped) and resets.
func (d *Detector) Flush(emit func(Event)) {
	if d.inSpeech {
		d.end(emit, false)
	}
	d.pending, d.pre = nil, nil
	if d.neural != nil {
		d.neural.Reset()
	}
}

func (d *Detector) frame(frame []int16, emit func(Event)) {
	voiced := d.voicedFrame(frame)
	d.speaking = voiced
	f := d.cfg.Frame
	if !d.inSpeech {
		d.pre = append(d.pre, frame...)
		if over := len(d.pre) - d.preMax - int(int64(d.cfg.SampleRate)*int64(d.cfg.MinSpeech)/int64(time.Second)); over > 0 {
			d.pre = append(d.pre[:0], d.pre[over:]...)
		}
		switch {
		case voiced:
			if d.voiced > 0 {
				d.voiced += d.gap // a short gap inside the run is speech
			} else if d.Neural() {
				// The run's first speech window: the level rose this much
				// before it (the windows credited already aside).
				before := d.energyRun
				if d.energyRun > 0 {
					before -= f // this window is counted as speech
				}
				d.lead = max(0, min(before, leadMax)-d.credit)
			}
			d.voiced, d.gap = d.voiced+f+d.credit, 0
			d.credit = 0
		case d.voiced > 0:
			d.gap += f
			if d.gap > d.cfg.OnsetHangover {
				d.voiced, d.gap, d.lead = 0, 0, 0
			}
		}
		if d.voiced >= d.cfg.MinSpeech {
			d.inSpeech, d.gap, d.bridged = true, 0, 0
			d.utt = appendPCM(make([]byte, 0, len(d.pre)*8), d.pre)
			d.pre = d.pre[:0]
			d.silence, d.sincePartial = 0, 0
			d.lastVoicedEnd = len(d.utt)
			emit(Event{Kind: Start, Audio: d.utt, Speech: d.voiced})
		}
		return
	}
	if voiced && d.silence > 0 && d.silence <= d.cfg.OnsetHangover {
		d.bridged += d.silence
	}
	if voiced && d.credit > 0 {
		d.bridged += d.credit // speech that was rising before the model was sure
		d.credit = 0
	}
	d.utt = appendPCM(d.utt, frame)
	d.sincePartial += f
	if voiced {
		d.voiced += f
		d.silence = 0
		d.lastVoicedEnd = len(d.utt)
		if d.paused {
			d.paused = false
			emit(Event{Kind: Resume, Speech: d.voiced})
		}
	} else {
		d.silence += f
	}
	if !d.paused && d.cfg.PauseAfter > 0 && d.silence >= d.cfg.PauseAfter && d.silence < d.EndSilence() {
		d.paused = true
		emit(Event{Kind: Pause, Audio: d.utt, Speech: d.voiced, Voiced: d.lastVoicedEnd})
	}
	switch {
	case d.silence >= d.EndSilence():
		d.end(emit, false)
	case audio.FramesDuration(len(d.utt)/2, d.cfg.SampleRate) >= d.cfg.MaxUtterance:
		d.end(emit, true)
	case d.cfg.PartialEvery > 0 && d.sincePartial >= d.cfg.PartialEvery:
		d.sincePartial = 0
		emit(Event{Kind: Partial, Audio: d.utt, Speech: d.voiced})
	}
}

// voicedFrame decides whether frame is speech: the model's probability
// (with hysteresis), or its level over the noise floor. The floor is kept
// either way, so the energy detector can take over if the model fails.
func (d *Detector) voicedFrame(frame []int16) bool {
	level := audio.DBFS(frame)
	if !d.primed { // the first frame seeds the floor
		d.floor, d.primed = min(level, -30), true
	}
	threshold := max(d.floor+d.cfg.MarginDB, d.cfg.MinLevelDB)
	if level > threshold {
		d.energyRun += d.cfg.Frame
	} else {
		d.energyRun = 0
	}
	if d.speaking {
		threshold -= 3 // hysteresis: stay voiced through small dips
	}
	d.adaptFloor(level)
	if d.Neural() {
		p, err := d.neural.Prob(frame)
		if err == nil {
			d.prob = p
			if d.speaking {
				return float64(p) >= d.cfg.NegThreshold
			}
			if float64(p) >= d.cfg.Threshold {
				// The model is sure a window or two after speech began;
				// the windows where its probability was already rising
				// were speech (credited to the count, at most riseMax).
				d.credit = min(d.rise, riseMax)
				d.rise = 0
				return true
			}
			if float64(p) >= riseThreshold {
				d.rise += d.cfg.Frame
			} else {
				d.rise = 0
			}
			return false
		}
		d.err = err
	}
	return level > threshold
}

// end closes the utterance, keeping 200 ms after the last speech frame.
func (d *Detector) end(emit func(Event), forced bool) {
	keep := min(len(d.utt), d.lastVoicedEnd+2*(d.cfg.SampleRate/5))
	utt := d.utt[:keep]
	speech := d.voiced
	d.inSpeech, d.utt, d.voiced, d.silence, d.paused, d.lead = false, nil, 0, 0, false, 0
	d.endSilence, d.endHeard = 0, 0
	emit(Event{Kind: End, Audio: utt, Speech: speech, Forced: forced})
}

// adaptFloor tracks the noise floor by minimum statistics: the lowest
// frame level over the last few seconds (kept as per-block minima). Speech
// has gaps between words, so the floor stays at the noise under it; a
// noise that rises and stays becomes the floor within the window.
func (d *Detector) adaptFloor(level float64) {
	if level < d.blockMin || d.blockFrames == 0 {
		d.blockMin = level
	}
	d.blockFrames++
	if d.blockFrames < floorBlockFrames {
		d.floor = min(d.floor, level)
		return
	}
	d.blocks = append(d.blocks, d.blockMin)
	if len(d.blocks) > floorBlocks {
		d.blocks = d.blocks[1:]
	}
	d.blockFrames = 0
	d.floor = d.blocks[0]
	for _, b := range d.blocks[1:] {
		d.floor = min(d.floor, b)
	}
}

// The neural VAD's onset: the windows just before the one it is sure of,
// whose probability was at least riseThreshold, count as speech (at most
// riseMax): the model is sure a window or two after speech begins.
const (
	riseThreshold = 0.15
	riseMax       = 96 * time.Millisecond
	// leadMax bounds how long before the model's first speech window the
	// level's rise counts for barge-in (SpeechBridged).
	leadMax = 160 * time.Millisecond
)

// The floor window: floorBlocks blocks of floorBlockFrames frames (3 s at 20 ms frames).
const (
	floorBlockFrames = 5
	floorBlocks      = 30
)

// appendPCM appends samples to b as little-endian 16-bit PCM.
func appendPCM(b []byte, samples []int16) []byte {
	n := len(b)
	b = slices.Grow(b, 2*len(samples))[:n+2*len(samples)]
	audio.PutSamples(b[n:], samples)
	return b
}
