// Package echo keeps the agent's own voice out of what it hears. When the
// person has speakers and no echo cancellation, the answer comes back
// through their microphone, delayed and attenuated; to a VAD it is speech,
// and it would interrupt the answer it is. The agent knows what it plays
// and when: the Canceller is given every frame written (Played) and each
// microphone frame (Process). It finds the echo's delay by correlating the
// microphone with what was played (find; then follows it on the energy
// envelopes, estimate), and mutes the frames that are echo alone: those
// that subtracting the fitted echo leaves far quieter, or that are no
// louder than what was played there less the echo's measured loss. The
// person's own speech over the answer is louder and reaches the VAD.
//
// Until a delay is found the search runs every 20 ms on the last 100 ms, so
// an echo is found within about a tenth of a second of its start. Meanwhile,
// for the first half second of sound that began in the microphone within the
// echo's longest delay of an answer's start and that the search finds like
// what was played, the frames no louder than it are muted (provisional), so
// an echo found late never lasts the minimum interruption speech. Without an
// echo (headphones, a browser's own echo cancellation) none is found and
// nothing is muted; the person's own words, unlike the answer, pass.
package echo

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/pkg/audio"
)

// Tuning.
const (
	rate = 16000
	// block is the envelope's resolution (10 ms).
	block = rate / 100
	// maxDelay is the longest echo delay searched (network both ways,
	// jitter buffers, the device).
	maxDelay = 800 * time.Millisecond
	// keep is the history of the reference and the envelopes.
	keep = 3 * time.Second
	// estimateOver is the envelope length correlated, once the microphone
	// has minEstimate of it.
	estimateOver = 2 * time.Second
	minEstimate  = 600 * time.Millisecond
	// reestimate: the delay is looked for again this often while echo may be present.
	reestimate = 250 * time.Millisecond
	// refine searches ± this around the envelope's delay (or the delay
	// known, when the envelope's is near it), to the sample, over the last
	// refineOver of audio.
	refine     = 20 * time.Millisecond
	refineOver = 300 * time.Millisecond
	// findEvery: while the delay is unknown, the search runs this often.
	findEvery = 20 * time.Millisecond
	// provisional: from the microphone's first sound while an answer
	// plays, this long a frame no louder than what was played is taken for
	// its echo while its delay is searched (found within about a tenth of
	// a second, later on a loaded machine).
	provisional = 500 * time.Millisecond
	// provisionalCorr: the search's correlation from which the microphone
	// resembles what was played (an echo through codecs finds 0.6–0.8;
	// the person's own words far less).
	provisionalCorr = 0.45
	// findOver: the microphone audio the first search correlates.
	findOver = 100 * time.Millisecond
	// minFind is the normalised correlation that makes a first delay
	// believed at once; agreeN searches in a row finding the same lag with
	// at least agreeFind do too (codecs blur the waveform).
	minFind   = 0.75
	agreeFind = 0.6
	agreeN    = 2
	// maxLossSpread: an echo's loss varies by less than this (dB, standard
	// deviation over 10 ms blocks) while it is found.
	maxLossSpread = 4.0
	// residueDB: after subtraction, a frame whose residue is this much
	// quieter than the echo removed is echo alone (muted).
	residueDB = 10.0
	// minCorr is the envelope correlation that makes a delay believed.
	minCorr = 0.6
	// maxDrift: the microphone's clock is anchored again to the frames'
	// arrival when they drift this far apart.
	maxDrift = 150 * time.Millisecond
	// silentDB: below this the reference is silence (no echo to expect).
	silentDB = -55.0
	// tail and slack widen the played audio a frame's echo is compared
	// with: tail before it (reverberation), slack after (timing jitter).
	tail  = 100 * time.Millisecond
	slack = 20 * time.Millisecond
	// margin: the person's speech over the echo is this much louder than
	// the echo expected.
	margin = 4.0
	// lossHistory frames of measured echo loss are kept, and minLosses
	// needed before they are used.
	lossHistory = 150
	minLosses   = 10
)

// Canceller removes one microphone stream's echo of the agent's audio.
// Played and Process may be called from different goroutines.
type Canceller struct {
	mu sync.Mutex
	rs *audio.Resampler
	// ref is the audio played, at 16 kHz, ending at refEnd (wall clock).
	ref    []int16
	refEnd time.Time
	// refEnv and micEnv are 10 ms block energies (dBFS) by block number
	// (unix time / 10 ms).
	refEnv, micEnv map[int64]float64
	// micT0 and micN: the microphone's clock (its first sample's time, the
	// samples since).
	micT0 time.Time
	micN  int
	// micBuf is the latest microphone audio, ending at micEnd.
	micBuf []int16
	micEnd time.Time
	// delay is the echo delay in samples (-1: not known), gain its gain.
	delay     int
	gain      float64
	fresh     bool      // the delay was just found: the gain starts again
	lastFind  int       // the lag the last search found (-1: none), in samples
	agreed    int       // searches in a row that found it
	losses    []float64 // how much quieter than played each recent frame was (dB)
	found     time.Time // the last first search (find)
	estimated time.Time
	// playStart is when the agent began playing after a silence (an
	// answer); searchFrom when the microphone first had sound since, the
	// delay unknown: the search's first moments (provisional).
	playStart, searchFrom time.Time
	// resembles: the last search found the microphone like what was
	// played at some delay (provisionalCorr), not yet sure enough.
	resembles bool
	// like: the latest frame with sound was like what was played (the
	// search's finding while the delay is unknown, the frame against the
	// echo expected once it is known): EchoLike.
	like bool
	// Stats.
	muted, frames int
}

// New returns a Canceller for audio played at playRate.
func New(playRate int) (*Canceller, error) {
	rs, err := audio.NewResampler(playRate, rate)
	if err != nil {
		return nil, err
	}
	return &Canceller{rs: rs, refEnv: map[int64]float64{}, micEnv: map[int64]float64{}, delay: -1, lastFind: -1}, nil
}

func blockOf(t time.Time) int64 { return t.UnixNano() / int64(10*time.Millisecond) }

// Played takes a frame of the agent's audio as it went out at `at`.
func (c *Canceller) Played(pcm []int16, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.rs.Process(nil, pcm)
	if c.refEnd.IsZero() || at.Sub(c.refEnd) > maxDelay {
		c.playStart = at
	}
	if c.refEnd.IsZero() || at.Sub(c.refEnd) > 40*time.Millisecond {
		// Silence since the last frame played (or none yet): start the
		// timeline again at `at`, with the history's silence.
		gap := min(int(at.Sub(c.refEnd)*rate/time.Second), int(keep*rate/time.Second))
		if c.refEnd.IsZero() {
			gap = 0
		}
		c.ref = append(c.ref, make([]int16, max(gap, 0))...)
		c.refEnd = at
	}
	start := c.refEnd
	c.ref = append(c.ref, s...)
	c.refEnd = c.refEnd.Add(time.Duration(len(s)) * time.Second / rate)
	if over := len(c.ref) - int(keep*rate/time.Second); over > 0 {
		c.ref = append(c.ref[:0], c.ref[over:]...)
	}
	envelope(c.refEnv, s, start)
	c.trim(c.refEnv, at)
}

// envelope adds the 10 ms block energies of s, which starts at start.
func envelope(env map[int64]float64, s []int16, start time.Time) {
	b0 := blockOf(start)
	for i := 0; i+block <= len(s); i += block {
		env[b0+int64(i/block)] = audio.DBFS(s[i : i+block])
	}
}

func (c *Canceller) trim(env map[int64]float64, now time.Time) {
	oldest := blockOf(now.Add(-keep))
	for b := range env {
		if b < oldest {
			delete(env, b)
		}
	}
}

// refAt returns the reference samples played over [from, from+n/rate), zeros
// where nothing was.
func (c *Canceller) refAt(from time.Time, n int) []int16 {
	out := make([]int16, n)
	if c.refEnd.IsZero() {
		return out
	}
	// Index of `from` in ref.
	i0 := len(c.ref) - int(c.refEnd.Sub(from)*rate/time.Second)
	for k := range out {
		if i := i0 + k; i >= 0 && i < len(c.ref) {
			out[k] = c.ref[i]
		}
	}
	return out
}

// Process takes a microphone frame that arrived at `at` (its last sample
// is the latest) and returns it without the echo: the echo subtracted, or
// silence when what remains is echo alone. Without echo to expect it
// returns mic itself.
func (c *Canceller) Process(mic []int16, at time.Time) []int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	// The microphone's own clock: its samples are continuous, while the
	// frames' arrival jitters (a busy machine, a jitter buffer releasing
	// several at once). It follows the arrival times, anchored again when
	// they drift apart by more than maxDrift (the track stopped a while).
	if c.micT0.IsZero() || at.Sub(c.micT0.Add(time.Duration(c.micN+len(mic))*time.Second/rate)).Abs() > maxDrift {
		c.micT0, c.micN = at.Add(-time.Duration(len(mic))*time.Second/rate), 0
	}
	c.micN += len(mic)
	at = c.micT0.Add(time.Duration(c.micN) * time.Second / rate)
	start := at.Add(-time.Duration(len(mic)) * time.Second / rate)
	envelope(c.micEnv, mic, start)
	c.trim(c.micEnv, at)
	c.micBuf = append(c.micBuf, mic...)
	c.micEnd = at
	if over := len(c.micBuf) - rate; over > 0 {
		c.micBuf = append(c.micBuf[:0], c.micBuf[over:]...)
	}
	if c.refEnd.IsZero() || at.Sub(c.refEnd) > maxDelay+keep/3 {
		c.like = false
		return mic // nothing played lately
	}
	// The loudest audio played over the echo window before this frame.
	loudest := math.Inf(-1)
	for b := blockOf(start.Add(-maxDelay)); b <= blockOf(at); b++ {
		if v, ok := c.refEnv[b]; ok {
			loudest = max(loudest, v)
		}
	}
	if loudest < silentDB {
		c.like = false
		return mic // silence was played: no echo to expect
	}
	c.frames++
	if at.Sub(c.estimated) >= reestimate {
		c.estimate(at)
	}
	if c.delay < 0 {
		level := audio.DBFS(mic)
		if level <= silentDB {
			return mic // nothing heard: nothing to take out
		}
		if at.Sub(c.found) >= findEvery {
			c.found = at
			c.find(at)
		}
		if c.delay < 0 {
			// Sound that began within maxDelay of the answer's start and
			// that the search finds like what was played may be its echo:
			// while the search has had less than provisional of it, a
			// frame no louder than what was played (+ margin) is muted.
			// After that, without an echo found, nothing is.
			if c.searchFrom.Before(c.playStart) {
				c.searchFrom = at
			}
			c.like = c.resembles
			if c.resembles && c.searchFrom.Sub(c.playStart) <= maxDelay && at.Sub(c.searchFrom) < provisional && level < loudest+margin {
				c.muted++
				return make([]int16, len(mic))
			}
			return mic
		}
	}
	delay := time.Duration(c.delay) * time.Second / rate
	ref := c.refAt(start.Add(-delay), len(mic))
	level := audio.DBFS(mic)
	// What was played under this frame, the echo's delay before, and the
	// 100 ms before that (a room's reverberation, a codec's smearing).
	played := math.Inf(-1)
	for b := blockOf(start.Add(-delay - tail)); b <= blockOf(at.Add(-delay+slack)); b++ {
		if v, ok := c.refEnv[b]; ok {
			played = max(played, v)
		}
	}
	if played < silentDB {
		c.like = false
		return mic // nothing was played there: no echo in this frame
	}
	// The echo's loss, in the level domain: a low percentile of how much
	// quieter the microphone was than what was played (echo alone is the
	// common case; the person's speech only raises the microphone).
	if exact := audio.DBFS(ref); exact > silentDB+10 {
		c.losses = append(c.losses, exact-level)
		if len(c.losses) > lossHistory {
			c.losses = c.losses[1:]
		}
	}
	loss := 0.0 // until measured: the echo may be as loud as what was played
	if len(c.losses) >= minLosses {
		sorted := slices.Clone(c.losses)
		slices.Sort(sorted)
		loss = sorted[len(sorted)/5] // the echo is at least this much quieter four times in five
	}
	// Subtracting the echo works where the path keeps the waveform (no
	// codec in between): a remainder far below the echo is echo alone.
	var mr, rr, mm float64
	for i := range mic {
		mr += float64(mic[i]) * float64(ref[i])
		rr += float64(ref[i]) * float64(ref[i])
		mm += float64(mic[i]) * float64(mic[i])
	}
	if level > silentDB {
		c.like = rr > 0 && mm > 0 && mr/math.Sqrt(rr*mm) >= provisionalCorr
	}
	if rr > 0 {
		g := min(max(mr/rr, 0), 4)
		switch {
		case c.fresh && 10*math.Log10(rr/float64(len(ref)))-90.3 > silentDB:
			c.gain, c.fresh = g, false
		case c.fresh:
		default:
			c.gain = 0.8*c.gain + 0.2*g
		}
		var echo, rest float64
		for i := range mic {
			e := c.gain * float64(ref[i])
			r := float64(mic[i]) - e
			echo += e * e
			rest += r * r
		}
		if echo > 0 && 10*math.Log10((rest+1)/(echo+1)) < -residueDB {
			c.muted++
			return make([]int16, len(mic))
		}
	}
	// Where it does not (codecs, rooms): a frame no louder than the echo
	// expected of what was played is echo alone; the person speaking over
	// it is louder than that by more than margin.
	if level < played-loss+margin {
		c.muted++
		return make([]int16, len(mic))
	}
	return mic
}

// estimate follows the echo's delay once find has found it: the lag of the reference's envelope that
// best follows the microphone's over the last estimateOver, then the sample
// lag within ±refine that best matches the latest audio.
func (c *Canceller) estimate(now time.Time) {
	c.estimated = now
	if c.delay < 0 {
		return // envelopes alike by chance are no echo: find establishes one
	}
	last := blockOf(now) - 1
	// Over the last estimateOver, or what the microphone has of it (at
	// least minEstimate).
	n := 0
	for n < int(estimateOver/(10*time.Millisecond)) {
		if _, ok := c.micEnv[last-int64(n)]; !ok {
			break
		}
		n++
	}
	if n < int(minEstimate/(10*time.Millisecond)) {
		return
	}
	mic := make([]float64, 0, n)
	for b := last - int64(n) + 1; b <= last; b++ {
		mic = append(mic, max(c.micEnv[b], -70))
	}
	best, bestLag := minCorr, -1
	for lag := 0; lag <= int(maxDelay/(10*time.Millisecond)); lag++ {
		ref := make([]float64, 0, n)
		for b := last - int64(n) + 1; b <= last; b++ {
			v, ok := c.refEnv[b-int64(lag)]
			if !ok {
				v = -90
			}
			ref = append(ref, max(v, -70))
		}
		if r := audio.Correlation(mic, ref); r > best {
			best, bestLag = r, lag
		}
	}
	if bestLag < 0 {
		return // the microphone does not follow what was played: keep what was known
	}
	// Refine to the sample over the last refineOver.
	span := int(refineOver * rate / time.Second)
	from := now.Add(-refineOver)
	micS := c.samplesOfMic(from, span)
	coarse := bestLag * block
	window := int(refine * rate / time.Second)
	if c.delay >= 0 && (coarse-c.delay)*1000/rate <= 30 && (c.delay-coarse)*1000/rate <= 30 {
		// The envelope's 10 ms steps wander around the delay known: follow
		// it within ±2 ms (a tenth of the first search's work).
		coarse, window = c.delay, 2*rate/1000
	}
	if micS == nil || audio.DBFS(micS) < silentDB {
		if c.delay < 0 {
			c.setDelay(coarse)
		}
		return
	}
	c.setDelay(c.bestLag(micS, from, coarse-window, coarse+window))
}

// bestLag is the lag in [lo, hi] (samples) at which what was played best
// matches mic, which starts at from.
func (c *Canceller) bestLag(mic []int16, from time.Time, lo, hi int) int {
	best, bestX := max(lo, 0), math.Inf(-1)
	for d := max(lo, 0); d <= hi; d++ {
		ref := c.refAt(from.Add(-time.Duration(d)*time.Second/rate), len(mic))
		var x, rr float64
		for i := range mic {
			x += float64(mic[i]) * float64(ref[i])
			rr += float64(ref[i]) * float64(ref[i])
		}
		if rr > 0 {
			if v := x / math.Sqrt(rr); v > bestX {
				bestX, best = v, d
			}
		}
	}
	return best
}

func (c *Canceller) setDelay(d int) {
	if c.delay < 0 || (c.delay-d) > rate/1000 || (d-c.delay) > rate/1000 {
		c.fresh = true
	}
	if c.delay < 0 || (c.delay-d) > rate/50 || (d-c.delay) > rate/50 {
		c.losses = c.losses[:0] // another path: measure its loss again
	}
	c.delay = d
}

// find looks for a first delay: the lag (0–maxDelay) at which what was
// played best matches the last findOver of the microphone, at 2 kHz, then
// to the sample around it.
func (c *Canceller) find(now time.Time) {
	c.resembles = false
	span := int(findOver * rate / time.Second)
	from := now.Add(-findOver)
	micS := c.samplesOfMic(from, span)
	if micS == nil {
		return
	}
	const dec = 8
	m := decimate(micS, dec)
	maxLag := int(maxDelay * rate / time.Second)
	// What was played from maxDelay before the window to its end.
	ref := decimate(c.refAt(from.Add(-maxDelay), span+maxLag), dec)
	var mm float64
	for _, v := range m {
		mm += v * v
	}
	if mm == 0 {
		return
	}
	best, bestLag := -1.0, -1
	for lag := 0; lag <= maxLag/dec; lag++ {
		// ref index of the window's start at this lag.
		o := maxLag/dec - lag
		var x, rr float64
		for i, v := range m {
			r := ref[o+i]
			x += v * r
			rr += r * r
		}
		if rr == 0 {
			continue
		}
		if v := x / math.Sqrt(mm*rr); v > best {
			best, bestLag = v, lag*dec
		}
	}
	c.resembles = best >= provisionalCorr
	if bestLag < 0 || best < agreeFind || !c.steadyLoss(now, bestLag) {
		c.lastFind, c.agreed = -1, 0
		return
	}
	// Believed when clear, or when agreeN searches in a row agree.
	if c.lastFind >= 0 && (bestLag-c.lastFind)*1000/rate <= 2 && (c.lastFind-bestLag)*1000/rate <= 2 {
		c.agreed++
	} else {
		c.agreed = 1
	}
	c.lastFind = bestLag
	if best < minFind && c.agreed < agreeN {
		return
	}
	c.setDelay(c.bestLag(micS, from, bestLag-dec, bestLag+dec))
}

// steadyLoss reports whether, at lag (samples), the microphone followed
// what was played at a steady loss over the last findOver: an echo passes
// through a fixed path, so its level is the played level less about the
// same dB in every 10 ms; another voice alike by chance is not.
func (c *Canceller) steadyLoss(now time.Time, lag int) bool {
	last := blockOf(now) - 1
	shift := int64((lag + block/2) / block)
	var diffs []float64
	for b := last - int64(findOver/(10*time.Millisecond)) + 1; b <= last; b++ {
		m, okM := c.micEnv[b]
		r, okR := c.refEnv[b-shift]
		if okM && okR && r > silentDB+10 {
			diffs = append(diffs, r-m)
		}
	}
	if len(diffs) < 5 {
		return false
	}
	var mean, v float64
	for _, d := range diffs {
		mean += d
	}
	mean /= float64(len(diffs))
	for _, d := range diffs {
		v += (d - mean) * (d - mean)
	}
	return math.Sqrt(v/float64(len(diffs))) < maxLossSpread
}

// decimate averages each n samples (a crude low-pass, enough to find a lag).
func decimate(s []int16, n int) []float64 {
	out := make([]float64, len(s)/n)
	for i := range out {
		var sum float64
		for _, v := range s[i*n : i*n+n] {
			sum += float64(v)
		}
		out[i] = sum / float64(n)
	}
	return out
}

// samplesOfMic is kept by Process: the latest microphone audio.
func (c *Canceller) samplesOfMic(from time.Time, n int) []int16 {
	if c.micEnd.IsZero() || len(c.micBuf) < n {
		return nil
	}
	i0 := len(c.micBuf) - int(c.micEnd.Sub(from)*rate/time.Second)
	if i0 < 0 || i0+n > len(c.micBuf) {
		return nil
	}
	return c.micBuf[i0 : i0+n]
}

// Delay is the echo delay found (false: not yet), on the canceller's own
// timeline: it includes its resampler's few milliseconds.
func (c *Canceller) Delay() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.delay < 0 {
		return 0, false
	}
	return time.Duration(c.delay) * time.Second / rate, true
}

// LastPlayed is when the last frame of the agent's audio played (zero:
// none yet).
func (c *Canceller) LastPlayed() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refEnd
}

// EchoLike reports whether the latest microphone frame with sound, while
// the agent's audio was recent, was like what was played: the search found
// it like the answer at some delay, or, the delay known, it followed the
// echo expected. What it passes of such frames is an echo the canceller
// did not take out (the words decide: the agent's barge-in).
func (c *Canceller) EchoLike() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.like
}

// Muted reports the frames muted as echo alone, of those processed while
// the agent's audio was recent.
func (c *Canceller) Muted() (muted, frames int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.muted, c.frames
}
