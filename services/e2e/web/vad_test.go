package web_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/testkit/netns"
	"github.com/alicia-voice/alicia/pkg/testkit/voiceclient"
)

// The noisy recording of TestVoiceBrowserVAD: noise alone, then the
// question spoken in the same noise, a little more noise, then silence (so
// that the turn ends on a server that hears the noise too).
const (
	// The lead is long enough for the page's VAD to be ready (and caught
	// up) before the speech on a loaded machine: its wasm and model load
	// in 2–4 s idle, several times that under a full test run.
	vadNoiseLead  = 15 * time.Second
	vadNoiseAfter = 2 * time.Second
	vadTail       = 30 * time.Second
	// The noise: sox's pink noise at this gain (about -31 dBFS RMS), its
	// level swinging 60% at 0.7 Hz (a fan whose hum comes and goes, which
	// the browser's noise suppression does not learn away).
	vadNoiseVol = "0.1"
)

// vadScript is the fake microphone's noisy recording.
type vadScript struct {
	wav      string
	speechAt time.Duration
	speech   time.Duration
}

// newVADScript synthesises the question with espeak-ng and mixes it with
// noise made by sox, deterministic (sox -R), into dir.
func newVADScript(t testing.TB, dir string) *vadScript {
	t.Helper()
	if _, err := exec.LookPath("sox"); err != nil {
		t.Fatalf("sox (task deps installs it): %v", err)
	}
	q := voiceclient.SpeechAt(t, voiceQuestion, wavRate)
	s := &vadScript{wav: filepath.Join(dir, "noisy.wav"), speechAt: vadNoiseLead, speech: audio.FramesDuration(len(q), wavRate)}
	silence := func(d time.Duration) []int16 { return make([]int16, int(d.Seconds()*wavRate)) }
	var speech []int16
	speech = append(speech, silence(vadNoiseLead)...)
	speech = append(speech, q...)
	speech = append(speech, silence(vadNoiseAfter+vadTail)...)
	speechWAV := filepath.Join(dir, "speech.wav")
	if err := os.WriteFile(speechWAV, audio.EncodeWAV(speech, wavRate), 0o644); err != nil {
		t.Fatal(err)
	}
	noiseWAV := filepath.Join(dir, "noise.wav")
	noiseLen := (vadNoiseLead + s.speech + vadNoiseAfter).Seconds()
	sox := func(args ...string) {
		if out, err := exec.Command("sox", append([]string{"-R"}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("sox %v: %v\n%s", args, err, out)
		}
	}
	sox("-n", "-r", strconv.Itoa(wavRate), "-c", "1", "-b", "16", noiseWAV,
		"synth", strconv.FormatFloat(noiseLen, 'f', 3, 64), "pinknoise", "vol", vadNoiseVol, "tremolo", "0.7", "60")
	// -m mixes; each input at its own level, the noise padded with silence.
	sox("-m", "-v", "1", speechWAV, "-v", "1", noiseWAV, "-b", "16", s.wav)
	return s
}

// heard is what the spec is told of one transcription request: how long
// the audio was, where its speech is (20 ms windows within 15 dB of its
// loudest) and how much sound came right before that speech (windows above
// -70 dBFS without a gap: the pre-roll of the gated microphone).
type heard struct {
	Text     string  `json:"text"`
	Duration float64 `json:"durationMs"`
	LevelDB  float64 `json:"levelDBFS"`
	SpeechAt float64 `json:"speechAtMs"`
	SpeechMs float64 `json:"speechMs"`
	LeadMs   float64 `json:"leadMs"`
}

func describe(r fakeopenai.TranscriptionRequest, text string) heard {
	h := heard{Text: text, Duration: float64(r.Duration.Microseconds()) / 1000, LevelDB: r.LevelDBFS, SpeechAt: -1}
	n := r.SampleRate / 50
	if n == 0 {
		return h
	}
	var lv []float64
	loudest := -120.0
	for off := 0; off+n <= len(r.Samples); off += n {
		l := audio.DBFS(r.Samples[off : off+n])
		lv = append(lv, l)
		loudest = max(loudest, l)
	}
	first, last := -1, -1
	for i, l := range lv {
		if l >= loudest-15 {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		return h
	}
	lead := 0
	for i := first - 1; i >= 0 && lv[i] > -70; i-- {
		lead++
	}
	h.SpeechAt, h.SpeechMs, h.LeadMs = float64(first*20), float64((last-first+1)*20), float64(lead*20)
	return h
}

// TestVoiceBrowserVAD: the in-page VAD and the gated microphone
// (e2e-voice-vad/, playwright.vad.config.ts) with a fake microphone playing
// speech in noise, against the whole voice stack. The spec reads what the
// fake transcriber received from ALICIA_WEB_ASR_LOG_URL.
func TestVoiceBrowserVAD(t *testing.T) {
	web := webDir(t)
	need(t, web)
	netns.Require(t)
	script := newVADScript(t, t.TempDir())
	var mu sync.Mutex
	var log []heard
	question := fakeopenai.NoWordsInNoise(func(r fakeopenai.TranscriptionRequest) fakeopenai.Transcript {
		if r.Duration >= script.speech*8/10 {
			return fakeopenai.Transcript{Text: voiceQuestion}
		}
		return fakeopenai.Transcript{Text: voicePartial}
	})
	transcriber := func(r fakeopenai.TranscriptionRequest) fakeopenai.Transcript {
		tr := question(r)
		mu.Lock()
		log = append(log, describe(r, tr.Text))
		mu.Unlock()
		return tr
	}
	asrLog := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(append([]heard{}, log...))
	}))
	t.Cleanup(asrLog.Close)
	s := startStack(t, func(o *stackOptions) { o.voice = transcriber })
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	runPlaywright(t, web, s, "playwright.vad.config.ts",
		"ALICIA_WEB_FAKE_MIC="+script.wav,
		"ALICIA_WEB_SPEECH_AT_MS="+ms(script.speechAt),
		"ALICIA_WEB_SPEECH_MS="+ms(script.speech),
		"ALICIA_WEB_ASR_LOG_URL="+asrLog.URL,
	)
}
