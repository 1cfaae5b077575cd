package web_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/netns"
	"github.com/alicia-voice/alicia/pkg/testkit/voiceclient"
	roomagent "github.com/alicia-voice/alicia/services/room-agent"
)

// What BenchmarkVoiceWebClient runs.
const (
	voiceBenchWarmup = 3
	voiceBenchTurns  = 20
	// The person says this; the fake model answers voiceBenchAnswer.
	voiceBenchPhrase = "Hello there, how are you today?"
	voiceBenchAnswer = "Sure."
	// Between two utterances: the end-of-turn silence, the answer, its
	// audio, and room to spare.
	voiceBenchGap = 4 * time.Second
)

// BenchmarkVoiceWebClient measures issue 13's figures against one stack
// with instant fake models (transcription, answer, speech) in the test's
// network namespace: end of the person's speech → first answer audio
// heard, in the page (Chromium, fake microphone, an analyser on Alicia's
// track) and by a Go LiveKit client on the same stack in the same run,
// with the room-agent's own figure (end-of-turn decision → first frame
// written) of both; the voice code's size; pressing the microphone →
// listening. Not a timed test: run it alone, on a machine doing nothing
// else.
//
//	go test -run '^$' -bench VoiceWebClient -benchtime 1x -timeout 30m ./services/e2e/web/
func BenchmarkVoiceWebClient(b *testing.B) {
	web := webDir(b)
	needBench(b, web)
	netns.Require(b)
	var mu sync.Mutex
	var agent []time.Duration
	s := startStack(b, func(o *stackOptions) {
		o.voice = func(fakeopenai.TranscriptionRequest) fakeopenai.Transcript {
			return fakeopenai.Transcript{Text: voiceBenchPhrase}
		}
		o.onVoiceToVoice = func(d time.Duration) { mu.Lock(); agent = append(agent, d); mu.Unlock() }
	})
	agentSince := func(from int) []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Duration(nil), agent[from:]...)
	}
	silence := roomagent.DefaultConfig().EndSilence

	// The page's recording: lead silence, then every turn's utterance and gap.
	pcm48 := voiceclient.SpeechAt(b, voiceBenchPhrase, wavRate)
	var rec []int16
	rec = append(rec, make([]int16, int(voiceLead.Seconds()*wavRate))...)
	for range voiceBenchWarmup + voiceBenchTurns {
		rec = append(rec, pcm48...)
		rec = append(rec, make([]int16, int(voiceBenchGap.Seconds()*wavRate))...)
	}
	wavPath := filepath.Join(b.TempDir(), "turns.wav")
	if err := os.WriteFile(wavPath, audio.EncodeWAV(rec, wavRate), 0o644); err != nil {
		b.Fatal(err)
	}

	b.ResetTimer()
	for range b.N {
		waitQuiet(b, s, 5*time.Minute)
		loadBefore := loadAverage()
		b.Logf("measuring; load average %s", loadBefore)

		// The Go client: the same utterance, the same number of turns.
		from := len(agentSince(0))
		goV2V := goVoiceTurns(b, s)
		goAgent := agentSince(from)

		// The page.
		from = len(agentSince(0))
		out := b.TempDir()
		runBenchSpecs(b, web, s, "playwright.bench-voice.config.ts", out,
			"ALICIA_WEB_FAKE_MIC="+wavPath,
			"ALICIA_WEB_BENCH_VOICE_TURNS="+strconv.Itoa(voiceBenchTurns),
			"ALICIA_WEB_BENCH_VOICE_WARMUP="+strconv.Itoa(voiceBenchWarmup),
		)
		pageAgent := agentSince(from)
		loadAfter := loadAverage()

		metrics, detail := readResults(b, out)
		ms := func(ds []time.Duration) []float64 {
			xs := make([]float64, len(ds))
			for i, d := range ds {
				xs[i] = float64(d.Microseconds()) / 1000
			}
			return xs
		}
		metrics["go-v2v-p50-ms"] = quantileMS(goV2V, 0.5)
		metrics["go-v2v-p99-ms"] = quantileMS(goV2V, 0.99)
		metrics["page-adds-p50-ms"] = metrics["page-v2v-p50-ms"] - metrics["go-v2v-p50-ms"]
		metrics["end-of-turn-silence-ms"] = float64(silence.Milliseconds())
		metrics["page-beyond-silence-p50-ms"] = metrics["page-v2v-p50-ms"] - metrics["end-of-turn-silence-ms"]
		metrics["go-beyond-silence-p50-ms"] = metrics["go-v2v-p50-ms"] - metrics["end-of-turn-silence-ms"]
		if len(goAgent) > 0 {
			metrics["agent-v2v-go-run-p50-ms"] = quantileMS(goAgent, 0.5)
		}
		if len(pageAgent) > voiceBenchWarmup {
			metrics["agent-v2v-page-run-p50-ms"] = quantileMS(pageAgent[voiceBenchWarmup:], 0.5)
		}
		detail["go"], _ = json.Marshal(map[string]any{"v2vMs": ms(goV2V), "agentMs": ms(goAgent)})
		detail["agent-page-run"], _ = json.Marshal(map[string]any{"agentMs": ms(pageAgent)})
		detail["host"], _ = json.Marshal(map[string]any{"loadAverageBefore": loadBefore, "loadAverageAfter": loadAfter})
		b.StopTimer()
		report(b, metrics, detail, filepath.Join(web, "bench-results", "voice-latest.json"))
		b.StartTimer()
	}
}

// goVoiceTurns runs the turns with a Go LiveKit client: end of its speech
// (the last loud sample out on its track) → the first loud piece of the
// answer it heard.
func goVoiceTurns(b *testing.B, s *stack) []time.Duration {
	b.Helper()
	cid, tok := voiceRoom(b, s)
	u := voiceclient.Join(b, tok.URL, tok.Token, true)
	u.Configure(&protocol.Configuration{ConversationID: &cid, Features: []protocol.ConfigurationFeaturesElem{
		protocol.ConfigurationFeaturesElemStreaming, protocol.ConfigurationFeaturesElemAudioOutput,
		protocol.ConfigurationFeaturesElemPartialResponses}}, cid)
	pcm := voiceclient.Speech(b, voiceBenchPhrase)
	tail := trailingQuiet(pcm, 16000)
	var v2v []time.Duration
	for i := range voiceBenchWarmup + voiceBenchTurns {
		u.Say(pcm)
		u.WaitSent()
		end := time.Now().Add(-tail)
		var first, last time.Time
		testkit.Eventually(b, 20*time.Second, func() bool {
			var n int
			n, first, _ = voiceclient.Loud(u.Heard(), end)
			return n > 0
		}, "no answer audio")
		// The answer plays to its end before the next turn.
		testkit.Eventually(b, 20*time.Second, func() bool {
			_, _, last = voiceclient.Loud(u.Heard(), end)
			return time.Since(last) > time.Second
		}, "the answer never ended")
		if i >= voiceBenchWarmup {
			v2v = append(v2v, first.Sub(end))
		}
	}
	return v2v
}

// trailingQuiet is how long the utterance's end is below -45 dBFS (espeak-ng
// ends with silence): the speech ended that long before its last sample.
func trailingQuiet(pcm []int16, rate int) time.Duration {
	frame := rate / 50
	end := len(pcm)
	for end >= frame && audio.DBFS(pcm[end-frame:end]) < -45 {
		end -= frame
	}
	return audio.FramesDuration(len(pcm)-end, rate)
}

type roomToken struct {
	URL, Token string
}

// voiceRoom makes a conversation for alice and gets its room token.
func voiceRoom(b *testing.B, s *stack) (string, roomToken) {
	b.Helper()
	var c struct {
		ID string `json:"id"`
	}
	call := func(method, path string, out any) {
		req, err := http.NewRequest(method, s.base+path, nil)
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+aliceKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			b.Fatalf("%s %s: %d", method, path, resp.StatusCode)
		}
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			b.Fatal(err)
		}
	}
	call(http.MethodPost, "/v1/conversations", &c)
	var tok roomToken
	call(http.MethodPost, "/v1/conversations/"+c.ID+"/token", &tok)
	return c.ID, tok
}
