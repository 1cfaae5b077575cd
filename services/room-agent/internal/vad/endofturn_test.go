package vad_test

import (
	"bufio"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/room-agent/internal/vad"
)

// The end-of-turn harness: user turns from testdata/turns.txt spoken by
// espeak-ng stretch by stretch, so it knows which words were said by each
// instant, run through the detector with a simulated ASR that answers each
// partial job (and, with the speculative transcription, each Pause) with the
// words that job's audio holds, after asrLatency.

// asrLatency is how long a transcript takes to come back (Whisper on a GPU,
// a few seconds of audio, plus the trip through NATS).
const asrLatency = 200 * time.Millisecond

// tail is the silence after each turn: more than any end-of-turn silence.
const tail = 2500 * time.Millisecond

type segment struct {
	text  string
	pause time.Duration // after it, inside the turn (0 for the last one)
}

var pauseMark = regexp.MustCompile(`\s*\[(\d+)\]\s*`)

// loadTurns reads a file of testdata.
func loadTurns(tb testing.TB, name string) [][]segment {
	tb.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var turns [][]segment
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		turns = append(turns, parseTurn(tb, line))
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return turns
}

// parseTurn reads "words [ms] words…".
func parseTurn(tb testing.TB, line string) []segment {
	var segs []segment
	for {
		loc := pauseMark.FindStringSubmatchIndex(line)
		if loc == nil {
			return append(segs, segment{text: line})
		}
		ms, err := strconv.Atoi(line[loc[2]:loc[3]])
		if err != nil {
			tb.Fatal(err)
		}
		segs = append(segs, segment{text: line[:loc[0]], pause: time.Duration(ms) * time.Millisecond})
		line = line[loc[1]:]
	}
}

// word is one word of a spoken turn and the sample where its audio ends.
type word struct {
	text string
	end  int
}

// spokenTurn is a turn's audio (with a second of room noise before it and
// tail after) and its words.
type spokenTurn struct {
	line      string
	pcm       []int16
	words     []word
	speechEnd int // sample where the last word ends
}

// espeakPath finds espeak-ng: under CI=true a missing one fails.
func espeakPath(tb testing.TB) string {
	tb.Helper()
	bin, err := exec.LookPath("espeak-ng")
	if err != nil {
		testkit.Missing(tb, "espeak-ng not installed: %v", err)
	}
	return bin
}

// say synthesises text at 16 kHz without the silence espeak-ng puts around it.
func say(bin, text string) ([]int16, error) {
	out, err := exec.Command(bin, "--stdout", "-v", "en-us", text).Output()
	if err != nil {
		return nil, err
	}
	w, err := audio.ParseWAV(out)
	if err != nil {
		return nil, err
	}
	pcm, err := audio.Resample(w.Mono(), w.SampleRate, rate)
	if err != nil {
		return nil, err
	}
	loud := func(s int16) bool { return s > 300 || s < -300 }
	first, last := slices.IndexFunc(pcm, loud), len(pcm)-1
	for last > first && !loud(pcm[last]) {
		last--
	}
	if first < 0 {
		return nil, nil
	}
	return pcm[first : last+1], nil
}

// speak synthesises turns, each stretch on its own.
func speak(tb testing.TB, turns [][]segment) []spokenTurn {
	tb.Helper()
	bin := espeakPath(tb)
	type job struct{ turn, seg int }
	pcms := make([][][]int16, len(turns))
	var jobs []job
	for i, segs := range turns {
		pcms[i] = make([][]int16, len(segs))
		for j := range segs {
			jobs = append(jobs, job{i, j})
		}
	}
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for k, jb := range jobs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			pcms[jb.turn][jb.seg], errs[k] = say(bin, turns[jb.turn][jb.seg].text)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			tb.Fatal(err)
		}
	}
	r := rand.New(rand.NewPCG(14, 4))
	out := make([]spokenTurn, len(turns))
	for i, segs := range turns {
		st := spokenTurn{pcm: make([]int16, rate)} // a second of room before
		var line []string
		for j, seg := range segs {
			line = append(line, seg.text)
			start, speech := len(st.pcm), pcms[i][j]
			st.pcm = append(st.pcm, speech...)
			// Words end in proportion to their letters: espeak-ng gives no timings.
			fields := strings.Fields(seg.text)
			total := 0
			for _, f := range fields {
				total += len(f) + 1
			}
			sum := 0
			for _, f := range fields {
				sum += len(f) + 1
				st.words = append(st.words, word{text: f, end: start + len(speech)*sum/total})
			}
			if j == len(segs)-1 {
				st.speechEnd = len(st.pcm)
				st.pcm = append(st.pcm, make([]int16, int(tail.Seconds()*rate))...)
			} else {
				st.pcm = append(st.pcm, make([]int16, int(seg.pause.Seconds()*rate))...)
			}
		}
		st.line = strings.Join(line, " … ")
		st.pcm = add(st.pcm, noise(audio.FramesDuration(len(st.pcm), rate), -60, r))
		out[i] = st
	}
	return out
}

// heardText is what Whisper makes of the words that end by sample at: the
// words as written, closed with a period when they do not end with ".", "?",
// "!" or "…" — Whisper closes a transcript of audio cut at a pause even
// mid-thought, and writes a pause's comma as a period as often as not.
func heardText(words []word, from, at int) string {
	var ws []string
	for _, w := range words {
		if w.end > from && w.end <= at {
			ws = append(ws, w.text)
		}
	}
	s := strings.Join(ws, " ")
	if s == "" || strings.HasSuffix(s, "...") || strings.ContainsRune(".?!", rune(s[len(s)-1])) {
		return s
	}
	return strings.TrimRight(s, ",;:") + "."
}

// asrModel is how transcripts reach the detector.
type asrModel struct {
	// atPause: the utterance is also transcribed at each Pause (speculative
	// transcription), not only at each partial job.
	atPause bool
	// coverage: the detector is told how much audio each transcript heard;
	// otherwise it takes a transcript as covering the utterance so far.
	coverage bool
}

// endOfTurn is how one turn ended.
type endOfTurn struct {
	cut     bool          // an End came before the last word
	silence time.Duration // from the last word to the End after it
	// speculations: Pauses transcribed (each starts a preemptive answer);
	// cancelled: those the user's speech went on after (Resume).
	speculations, cancelled int
}

// runTurn puts a spoken turn through a detector configured with cfg and the
// end-of-turn rule.
func runTurn(tb testing.TB, st spokenTurn, cfg vad.Config, rule vad.EndOfTurn, asr asrModel) endOfTurn {
	tb.Helper()
	d, err := vad.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	defer d.Close()
	type transcript struct {
		at, utt, heard int
		text           string
	}
	var (
		pending       []transcript
		utt, uttStart int
		pos           int
		paused        bool
		ends          []int
		specs, cancel int
		latency       = int(asrLatency.Seconds() * rate)
		transcribe    = func(heard int) {
			pending = append(pending, transcript{at: pos + latency, utt: utt, heard: heard,
				text: heardText(st.words, uttStart, uttStart+heard/2)})
		}
	)
	emit := func(ev vad.Event) {
		switch ev.Kind {
		case vad.Start:
			utt++
			uttStart = pos - len(ev.Audio)/2
		case vad.Partial:
			if !paused { // the room-agent sends none while a speculative job covers the speech
				transcribe(len(ev.Audio))
			}
		case vad.Pause:
			if asr.atPause {
				paused = true
				specs++
				transcribe(len(ev.Audio)) // the job carries the utterance so far
			}
		case vad.Resume:
			if paused {
				cancel++
			}
			paused = false
		case vad.End:
			ends, paused = append(ends, pos), false
		}
	}
	for off := 0; off+320 <= len(st.pcm); off += 320 { // 20 ms pushes, as the track delivers
		for len(pending) > 0 && pending[0].at <= off {
			p := pending[0]
			pending = pending[1:]
			if p.utt != utt || !d.InSpeech() {
				continue // a transcript of an utterance that ended
			}
			heard := -1
			if asr.coverage {
				heard = p.heard
			}
			d.SetEndSilence(rule.Silence(p.text, "en"), heard)
		}
		pos = off + 320 // events happen at the end of the frame
		d.Push(st.pcm[off:pos], emit)
	}
	e := endOfTurn{speculations: specs, cancelled: cancel}
	for _, at := range ends {
		if at < st.speechEnd {
			e.cut = true
			continue
		}
		e.silence = audio.FramesDuration(at-st.speechEnd, rate)
		return e
	}
	tb.Fatalf("%q: no end of turn after its last word (ends at %v, speech end %d)", st.line, ends, st.speechEnd)
	return e
}

var (
	spokenMu    sync.Mutex
	spokenTurns = map[string][]spokenTurn{}
)

// spoken synthesises a file of testdata once per test binary.
func spoken(tb testing.TB, name string) []spokenTurn {
	tb.Helper()
	espeakPath(tb)
	spokenMu.Lock()
	defer spokenMu.Unlock()
	if _, ok := spokenTurns[name]; !ok {
		spokenTurns[name] = speak(tb, loadTurns(tb, name))
	}
	if len(spokenTurns[name]) == 0 {
		tb.Fatalf("no turns in %s", name)
	}
	return spokenTurns[name]
}

// TestEndOfTurnSpoken: with the adaptive rule, a pause after "and" does not
// end the turn that the fixed 500 ms cuts, and a complete question ends
// after about the rule's minimum.
func TestEndOfTurnSpoken(t *testing.T) {
	espeakPath(t)
	turns := speak(t, [][]segment{
		parseTurn(t, "I'd like a coffee and [600] a croissant, please."),
		parseTurn(t, "What time is it in Tokyo?"),
	})
	cfg := vad.Config{EndSilence: 500 * time.Millisecond}
	adaptive, asr := vad.EndOfTurn{Min: 300 * time.Millisecond, Max: time.Second}, asrModel{atPause: true, coverage: true}

	if got := runTurn(t, turns[0], cfg, vad.EndOfTurn{Off: true}, asr); !got.cut {
		t.Fatalf("fixed 500 ms: the 600 ms pause after \"and\" did not end the turn (%+v): the test proves nothing", got)
	}
	if got := runTurn(t, turns[0], cfg, adaptive, asr); got.cut {
		t.Fatalf("adaptive: the turn was cut in the pause after \"and\"")
	}
	fixed := runTurn(t, turns[1], cfg, vad.EndOfTurn{Off: true}, asr)
	got := runTurn(t, turns[1], cfg, adaptive, asr)
	if got.cut || got.silence < adaptive.Min-40*time.Millisecond || got.silence > adaptive.Min+80*time.Millisecond {
		t.Fatalf("adaptive: the question ended %v after its last word (cut %v), want about %v", got.silence, got.cut, adaptive.Min)
	}
	if fixed.silence < 480*time.Millisecond {
		t.Fatalf("fixed: the question ended %v after its last word, want 500 ms", fixed.silence)
	}
}

// BenchmarkEndOfTurn reports, over the turns of testdata/turns.txt (the
// rule was written on them) and testdata/turns-heldout.txt (it was not),
// the share of turns cut before the user finished and the silence from the
// end of speech to the end of the turn (mean, p50, p90), for the fixed
// 500 ms end silence and the adaptive rule: with partial transcripts only,
// with the speculative transcript at each pause too (what the room-agent
// does by default), and with partials whose coverage is not known.
func BenchmarkEndOfTurn(b *testing.B) {
	cfg := vad.Config{EndSilence: 500 * time.Millisecond}
	// The neural VAD (the room-agent's default) on the same turns.
	neural := vad.Config{EndSilence: 500 * time.Millisecond, Model: silero(b)}
	for _, set := range []string{"turns.txt", "turns-heldout.txt"} {
		turns := spoken(b, set)
		for _, c := range []struct {
			name string
			cfg  vad.Config
			rule vad.EndOfTurn
			asr  asrModel
		}{
			{"fixed-500ms", cfg, vad.EndOfTurn{Off: true}, asrModel{}},
			{"fixed-500ms/speculative", cfg, vad.EndOfTurn{Off: true}, asrModel{atPause: true, coverage: true}},
			{"adaptive/partials", cfg, vad.EndOfTurn{}, asrModel{coverage: true}},
			{"adaptive/partials+speculative", cfg, vad.EndOfTurn{}, asrModel{atPause: true, coverage: true}},
			{"adaptive/partials-without-coverage", cfg, vad.EndOfTurn{}, asrModel{}},
			{"neural/fixed-500ms", neural, vad.EndOfTurn{Off: true}, asrModel{}},
			{"neural/adaptive/partials+speculative", neural, vad.EndOfTurn{}, asrModel{atPause: true, coverage: true}},
		} {
			b.Run(strings.TrimSuffix(set, ".txt")+"/"+c.name, func(b *testing.B) {
				var res []endOfTurn
				for b.Loop() {
					res = res[:0]
					for _, st := range turns {
						res = append(res, runTurn(b, st, c.cfg, c.rule, c.asr))
					}
				}
				reportEndOfTurn(b, res)
			})
		}
	}
}

func reportEndOfTurn(b *testing.B, res []endOfTurn) {
	cut, sum, specs, cancelled := 0, 0.0, 0, 0
	sils := make([]float64, 0, len(res))
	for _, r := range res {
		if r.cut {
			cut++
		}
		specs, cancelled = specs+r.speculations, cancelled+r.cancelled
		ms := float64(r.silence) / float64(time.Millisecond)
		sils, sum = append(sils, ms), sum+ms
	}
	slices.Sort(sils)
	b.ReportMetric(float64(len(res)), "turns")
	b.ReportMetric(100*float64(cut)/float64(len(res)), "cut-%")
	b.ReportMetric(sum/float64(len(sils)), "mean-ms")
	b.ReportMetric(sils[len(sils)/2], "p50-ms")
	b.ReportMetric(sils[len(sils)*9/10], "p90-ms")
	if specs > 0 {
		// The cost of speculation: preemptive answers started, and
		// cancelled because the user went on, per 100 turns.
		b.ReportMetric(100*float64(specs)/float64(len(res)), "preempts/100turns")
		b.ReportMetric(100*float64(cancelled)/float64(len(res)), "cancelled/100turns")
	}
	b.ReportMetric(0, "ns/op")
}
