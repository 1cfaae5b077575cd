package web_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/devtools"
	"github.com/alicia-voice/alicia/pkg/engines"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/livekitserver"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/netns"
	"github.com/alicia-voice/alicia/pkg/testkit/voiceclient"
	"github.com/alicia-voice/alicia/services/asr"
	"github.com/alicia-voice/alicia/services/gateway"
	roomagent "github.com/alicia-voice/alicia/services/room-agent"
	"github.com/alicia-voice/alicia/services/tts"
)

// WebRTC needs addresses other than loopback: the package runs in a network
// namespace of its own (pkg/testkit/netns), where livekit-server, the
// room-agent and Chromium meet on netns.IP(). The text specs do not care.
func TestMain(m *testing.M) { netns.Main(m) }

// What the person says into the fake microphone, and what the fake
// transcriber and model make of it. Keep in step with e2e-voice/fixtures.ts.
const (
	// The question: its answer is long, so the second utterance cuts it off.
	voiceQuestion = "What is the weather like in Paris tomorrow?"
	// The interruption: much longer than the question, which is how the fake
	// transcriber tells the two apart (by the audio's duration).
	voiceInterrupt = "Actually, never mind the weather in Paris. I would much rather hear a short joke about cats instead, please."
	// What the fake transcriber says of a piece of speech too short to be
	// either (the partial transcripts).
	voicePartial = "What is the weather"
	voiceJoke    = "Why was the cat sitting on the computer? To keep an eye on the mouse!"
)

// voiceAnswer is the long spoken answer to the question.
var voiceAnswer = []string{
	"Tomorrow in Paris will be mostly sunny.",
	"The morning starts cool, around twelve degrees.",
	"By the afternoon it warms up to twenty-one degrees.",
	"A light breeze comes from the west.",
	"There is no rain in the forecast at all.",
	"In the evening the sky stays clear and the temperature falls slowly.",
	"It is a good day for a walk along the Seine.",
	"Enjoy your day in Paris!",
}

// voiceScript is the fake microphone's recording: lead silence (the page
// joins the room meanwhile), the question, a pause while the answer starts
// playing, the interruption, then silence.
type voiceScript struct {
	wav         string        // 48 kHz mono 16-bit, for --use-file-for-fake-audio-capture
	questionAt  time.Duration // from the start of the capture
	question    time.Duration
	interruptAt time.Duration
	interrupt   time.Duration
}

const (
	voiceLead = 4 * time.Second
	// The pause gives the answer time to start and be seen playing before
	// the interruption, on a loaded machine too (3.5 s was not always).
	voicePause = 6 * time.Second
	voiceTail  = 40 * time.Second
	wavRate    = 48000
)

// newVoiceScript synthesises the recording with espeak-ng into dir.
func newVoiceScript(t testing.TB, dir string) *voiceScript {
	t.Helper()
	q, i := voiceclient.SpeechAt(t, voiceQuestion, wavRate), voiceclient.SpeechAt(t, voiceInterrupt, wavRate)
	silence := func(d time.Duration) []int16 { return make([]int16, int(d.Seconds()*wavRate)) }
	var pcm []int16
	pcm = append(pcm, silence(voiceLead)...)
	pcm = append(pcm, q...)
	pcm = append(pcm, silence(voicePause)...)
	pcm = append(pcm, i...)
	pcm = append(pcm, silence(voiceTail)...)
	s := &voiceScript{wav: filepath.Join(dir, "voice.wav"), questionAt: voiceLead, question: audio.FramesDuration(len(q), wavRate)}
	s.interruptAt = s.questionAt + s.question + voicePause
	s.interrupt = audio.FramesDuration(len(i), wavRate)
	if err := os.WriteFile(s.wav, audio.EncodeWAV(pcm, wavRate), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

// transcriber tells the question from the interruption by how long the
// audio is; shorter pieces (partial transcripts) are the question's start.
func (s *voiceScript) transcriber() fakeopenai.Transcriber {
	mid := (s.question + s.interrupt) / 2
	return func(r fakeopenai.TranscriptionRequest) fakeopenai.Transcript {
		switch {
		case r.Duration >= mid:
			return fakeopenai.Transcript{Text: voiceInterrupt}
		case r.Duration >= s.question*8/10:
			return fakeopenai.Transcript{Text: voiceQuestion}
		default:
			return fakeopenai.Transcript{Text: voicePartial}
		}
	}
}

// startVoice runs livekit-server on the namespace's address, the asr and the
// tts against a fake speech server (transcriptions as the script says,
// audible synthetic speech), and a room-agent; the gateway hands out tokens
// for that LiveKit.
func startVoice(t testing.TB, o stackOptions, natsURL string, gcfg *gateway.Config) {
	t.Helper()
	netns.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lk, err := livekitserver.Start(ctx, livekitserver.Options{Bin: devtools.Need(t, devtools.LiveKit), IP: netns.IP()})
	if err != nil {
		t.Fatalf("livekit-server: %v", err)
	}
	t.Cleanup(func() { _ = lk.Stop() })
	speech := fakeopenai.New(t, fakeopenai.WithModels("fake-whisper", "fake-kokoro"))
	speech.SetTranscriber(o.voice)
	log := testkit.Log()

	acfg := asr.DefaultConfig()
	acfg.NATSURL, acfg.URL, acfg.Model = natsURL, speech.URL(), "fake-whisper"
	testkit.Go(t, "asr", func(ctx context.Context) error { return asr.Run(ctx, acfg, log.With().Str("service", "asr").Logger()) })
	tcfg := tts.DefaultConfig()
	tcfg.NATSURL, tcfg.Engine, tcfg.URL, tcfg.Model = natsURL, "openai", speech.URL(), "fake-kokoro"
	testkit.Go(t, "tts", func(ctx context.Context) error { return tts.Run(ctx, tcfg, log.With().Str("service", "tts").Logger()) })
	rcfg := roomagent.DefaultConfig()
	rcfg.NATSURL, rcfg.LiveKitURL, rcfg.LiveKitAPIKey, rcfg.LiveKitAPISecret = natsURL, lk.URL, lk.APIKey, lk.APISecret
	rcfg.OnVoiceToVoice = o.onVoiceToVoice
	// The voice benchmark's figures are beyond the fixed end silence: the
	// adaptive end of turn would shorten it after the fake's complete sentences.
	rcfg.AdaptiveEnd = false
	// The first spec reads the call's SessionStats after hanging up: the
	// agent leaves (and the session ends) 3 s after the person did.
	rcfg.EmptyTimeout = 3 * time.Second
	testkit.Go(t, "room-agent", func(ctx context.Context) error {
		return roomagent.Run(ctx, rcfg, log.With().Str("service", "room-agent").Logger())
	})
	gcfg.LiveKit = gateway.LiveKit{URL: lk.URL, APIKey: lk.APIKey, APISecret: lk.APISecret, TokenTTL: time.Hour}
	gcfg.ASR = engines.Engine{Kind: engines.OpenAI, URL: speech.URL(), Model: "fake-whisper"}
	gcfg.TTS = engines.Engine{Kind: engines.OpenAI, URL: speech.URL(), Model: "fake-kokoro", Voice: engines.DefaultVoice(engines.OpenAI)}
}

// TestVoiceBrowser: the web client's voice specs (e2e-voice/, their own
// Playwright config) in Chromium with a fake microphone playing the voice
// script, against the whole stack: livekit-server, room-agent, asr, tts,
// llm, memory, persistence, the gateway.
func TestVoiceBrowser(t *testing.T) {
	web := webDir(t)
	need(t, web)
	netns.Require(t)
	script := newVoiceScript(t, t.TempDir())
	s := startStack(t, func(o *stackOptions) { o.voice = script.transcriber() })
	runPlaywright(t, web, s, "playwright.voice.config.ts", voiceEnv(script)...)
}

// voiceEnv tells the specs where the recording is and when its parts come.
func voiceEnv(s *voiceScript) []string {
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	return []string{
		"ALICIA_WEB_FAKE_MIC=" + s.wav,
		"ALICIA_WEB_QUESTION_AT_MS=" + ms(s.questionAt),
		"ALICIA_WEB_QUESTION_MS=" + ms(s.question),
		"ALICIA_WEB_INTERRUPT_AT_MS=" + ms(s.interruptAt),
		"ALICIA_WEB_INTERRUPT_MS=" + ms(s.interrupt),
	}
}
