package voice_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/voiceclient"
	"github.com/alicia-voice/alicia/services/gateway"
	roomagent "github.com/alicia-voice/alicia/services/room-agent"
)

// BenchmarkVoiceToVoice: end of user speech (the end-pointer's decision,
// after the configured silence) → the first agent audio frame written to
// the agent's track, with instant fake models (transcription, one-sentence
// answer, speech). One turn per iteration.
func BenchmarkVoiceToVoice(b *testing.B) {
	var mu sync.Mutex
	var v2v []time.Duration
	s := newStack(b, options{answer: "Sure.", agent: func(c *roomagent.Config) {
		c.OnVoiceToVoice = func(d time.Duration) { mu.Lock(); v2v = append(v2v, d); mu.Unlock() }
	}})
	cid := s.conversation()
	u := voiceclient.Join(b, s.lk.URL, s.token(cid), true)
	u.Configure(voiceConfig(cid), cid)
	utter := voiceclient.Speech(b, "Hello there.")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		u.Say(utter)
		testkit.Eventually(b, 20*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(v2v) > i }, "no answer audio")
		time.Sleep(1500 * time.Millisecond) // the answer plays out before the next turn
	}
	b.StopTimer()
	mu.Lock()
	defer mu.Unlock()
	sort.Slice(v2v, func(i, j int) bool { return v2v[i] < v2v[j] })
	q := func(p float64) float64 { return float64(v2v[int(p*float64(len(v2v)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkSessionCPU: CPU of the room-agent, run as its own process (so
// nothing else is counted), per voice session while every user talks
// continuously: Opus decoding, VAD, partial ASR jobs, the data channel. The
// users, livekit-server and the other services run elsewhere. It reports
// the whole process divided by the sessions, and the marginal cost (minus
// what the agent spends idle, with no room).
func BenchmarkSessionCPU(b *testing.B) {
	// GOMAXPROCS=1 is how deploy/ runs room-agent replicas (one per core):
	// fewer cross-thread wakeups per audio packet. The binary keeps the
	// runtime's sysmon awake by itself (room-agent/internal/sysmon); the
	// last case shows what that saves.
	for _, c := range []struct{ name, procs, sysmon string }{
		{"gomaxprocs=1", "1", "on"}, {"gomaxprocs=2", "2", "on"}, {"gomaxprocs=1/sysmon=off", "1", "off"},
	} {
		b.Run(c.name, func(b *testing.B) { sessionCPU(b, "GOMAXPROCS="+c.procs, "ALICIA_SYSMON_AWAKE="+c.sysmon) })
	}
}

func sessionCPU(b *testing.B, env ...string) {
	const sessions = 4
	// One user holds every session: past the default 3 rooms per user.
	s := newStack(b, options{answer: "Sure.", noAgent: true, gateway: func(c *gateway.Config) { c.Quotas.RoomsPerUser = sessions }})
	agent := s.agentProcess(b, env...)
	time.Sleep(time.Second) // started
	idleFrom := procCPU(b, agent.Process.Pid)
	time.Sleep(5 * time.Second)
	idle := procCPU(b, agent.Process.Pid) - idleFrom // the agent with no room: NATS, fetch loop, GC
	idleRSS := procRSS(b, agent.Process.Pid)
	talk := voiceclient.Speech(b, "This is a long stream of continuous speech that goes on and on without a pause for a while, and it keeps going for quite some time.")
	var users []*voiceclient.User
	for range sessions {
		cid := s.conversation()
		u := voiceclient.Join(b, s.lk.URL, s.token(cid), true)
		u.Configure(voiceConfig(cid), cid)
		users = append(users, u)
	}
	const window = 10 * time.Second
	b.ResetTimer()
	var cpu time.Duration
	for i := 0; i < b.N; i++ {
		for _, u := range users {
			for range 2 {
				u.Say(talk)
			}
		}
		time.Sleep(time.Second) // talking has started everywhere
		before := procCPU(b, agent.Process.Pid)
		if f := os.Getenv("ALICIA_AGENT_PROFILE"); f != "" { // where the agent's CPU goes
			saveProfile(b, f, window)
		} else {
			time.Sleep(window)
		}
		cpu += procCPU(b, agent.Process.Pid) - before
	}
	b.StopTimer()
	b.ReportMetric(cpu.Seconds()/window.Seconds()/float64(b.N)/sessions, "cores/session")
	idleCores := idle.Seconds() / 5
	b.ReportMetric((cpu.Seconds()/window.Seconds()/float64(b.N)-idleCores)/sessions, "marginal-cores/session")
	b.ReportMetric(idleCores, "idle-cores")
	b.ReportMetric(float64(procRSS(b, agent.Process.Pid)-idleRSS)/sessions/(1<<20), "MB/session")
	b.ReportMetric(0, "ns/op")
}

// procCPU is the user+system CPU time of process pid (/proc/pid/stat, clock ticks of 10 ms).
func procCPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// saveProfile fetches a CPU profile of the agent process over window.
func saveProfile(tb testing.TB, file string, window time.Duration) {
	tb.Helper()
	resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", agentMetricsAddr, int(window.Seconds())))
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := os.Create(file)
	if err != nil {
		tb.Fatal(err)
	}
	_, err = io.Copy(out, resp.Body)
	if err = errors.Join(err, out.Close()); err != nil {
		tb.Fatalf("profile %s: %v", file, err)
	}
}

// procRSS is the resident memory of process pid in bytes (/proc/pid/status VmRSS).
func procRSS(tb testing.TB, pid int) int64 {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	tb.Fatal("no VmRSS")
	return 0
}

// BenchmarkVoiceToVoiceClient: the end of the user's speech → the first
// agent audio the user hears, at the client, minus the end-of-turn silence
// (ALICIA_VAD_END_SILENCE, 500 ms): what the pipeline adds beyond it. With
// instant fake models and with the gpu-box timing profile, speculation on
// and off, in one run. One turn per iteration.
func BenchmarkVoiceToVoiceClient(b *testing.B) {
	// The floor under every case: the way in and out through LiveKit.
	b.Run("floor/audio-round-trip", benchAudioRoundTrip)
	for _, prof := range []fakeopenai.Profile{fakeopenai.Instant, fakeopenai.GPUBox} {
		for _, spec := range []bool{true, false} {
			name := prof.Name
			if name == "" {
				name = "instant"
			}
			b.Run(fmt.Sprintf("%s/speculation=%v", name, spec), func(b *testing.B) {
				var mu sync.Mutex
				var agentV2V []time.Duration
				// As with real models, a transcript grows with the audio
				// and the answer follows the question: what a speculation at
				// a pause inside the question starts cannot serve the turn.
				s := newStack(b, options{profile: prof, respond: func(r fakeopenai.Request) fakeopenai.Turn {
					return fakeopenai.Text("You asked: " + r.LastUser() + " It will be sunny tomorrow.")
				},
					agent: func(c *roomagent.Config) {
						// The fixed silence, so that what the pipeline adds is
						// the time beyond it (the adaptive end of turn has its
						// own benchmark, room-agent/internal/vad).
						c.Speculation, c.AdaptiveEnd = spec, false
						c.OnVoiceToVoice = func(d time.Duration) { mu.Lock(); agentV2V = append(agentV2V, d); mu.Unlock() }
					}})
				cid := s.conversation()
				u := voiceclient.Join(b, s.lk.URL, s.token(cid), true)
				u.Configure(voiceConfig(cid), cid)
				const question = "What will the weather be like tomorrow?"
				utter := trim(voiceclient.Speech(b, question))
				speech := audio.FramesDuration(len(utter), 16000)
				s.speech.SetTranscriber(fakeopenai.Growing(question, speech/time.Duration(len(strings.Fields(question)))))
				silence := roomagent.DefaultConfig().EndSilence
				floor := modelFloor(prof, speech, "You asked: "+question+" It", spec)
				var beyond []time.Duration
				b.ResetTimer()
				seen := len(u.Received())
				for i := 0; i < b.N; i++ {
					u.Say(utter)
					u.WaitSent()
					end := time.Now()
					var first time.Time
					testkit.Eventually(b, 20*time.Second, func() bool {
						var n int
						n, first, _ = voiceclient.Loud(u.Heard(), end)
						return n > 0
					}, "no answer audio")
					beyond = append(beyond, first.Sub(end)-silence)
					// The answer plays out (its last sentence played) before
					// the next turn.
					testkit.Eventually(b, 20*time.Second, func() bool {
						for _, e := range u.Received()[seen:] {
							if p, ok := e.Body.(*protocol.SentencePlayout); ok && p.Status == protocol.SentencePlayoutStatusPlayed && p.Sequence == 2 {
								return true
							}
						}
						return false
					}, "the answer did not play out")
					seen = len(u.Received())
				}
				b.StopTimer()
				sort.Slice(beyond, func(i, j int) bool { return beyond[i] < beyond[j] })
				q := func(p float64) float64 {
					return float64(beyond[int(p*float64(len(beyond)-1))].Microseconds()) / 1000
				}
				b.ReportMetric(q(0.5), "beyond-silence-p50-ms")
				b.ReportMetric(q(0.99), "beyond-silence-p99-ms")
				b.ReportMetric(float64(floor.Microseconds())/1000, "model-floor-ms")
				// Inside the agent: its end-of-turn decision → the answer's
				// first frame written to its track. The rest is the way in
				// (the user's audio to the decision) and out (to the ear).
				mu.Lock()
				sort.Slice(agentV2V, func(i, j int) bool { return agentV2V[i] < agentV2V[j] })
				if len(agentV2V) > 0 {
					b.ReportMetric(float64(agentV2V[len(agentV2V)/2].Microseconds())/1000, "agent-p50-ms")
				}
				mu.Unlock()
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// BenchmarkBargeIn: barge-in as the user hears it. The user speaks over the
// answer; from the moment their speech has lasted the minimum interruption
// speech (ALICIA_BARGE_IN_MIN, 200 ms: when the client's microphone has sent
// that much of it, the onset being the start of its first 20 ms frame, as a
// live microphone captures it) to the last agent audio frame the client
// receives (p50-ms: until silent, after the words confirm it), and to the
// last frame at the answer's level (lowered-p50-ms: the barge-in lowers it
// by ALICIA_BARGE_IN_DUCK_DB at once). The interruptions are espeak-ng phrases, most with a stop
// consonant or a comma in their first 300 ms ("What about…": a silent
// frame after "wha-"), taken in turn. They have words, so each is confirmed
// and answered; the next iteration speaks over that answer. It also reports barge-in → playout
// stopped inside the agent (alicia_voice_barge_in_stop_seconds, mean). Run
// with -benchtime=20x.
func BenchmarkBargeIn(b *testing.B) {
	const bargeMin = 200 * time.Millisecond
	long := "The forecast for Paris tomorrow is mostly sunny with a few clouds in the afternoon. " +
		"Temperatures will climb to about twenty degrees by three in the afternoon. " +
		"In the evening a light breeze will come from the west and the sky stays clear."
	s := newStack(b, options{answer: long, agent: func(c *roomagent.Config) { c.BargeInMin = bargeMin }})
	cid := s.conversation()
	u := voiceclient.Join(b, s.lk.URL, s.token(cid), true)
	u.Configure(voiceConfig(cid), cid)
	var phrases [][]int16
	for _, text := range []string{"What about tomorrow?", "But what about the weekend?", "Actually, stop there.",
		"Okay, stop, stop.", "Wait, stop, that is enough."} {
		phrases = append(phrases, voiceclient.Speech(b, text))
	}
	tick := make([]int16, 320) // 20 ms of silence: Say it and WaitSent to learn when the microphone's frames go out

	u.Say(voiceclient.Speech(b, "Tell me about the weather in Paris."))
	nStops, sumStops := histogram(b, "alicia_voice_barge_in_stop_seconds")
	var lags, lowered []time.Duration
	since := time.Time{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		testkit.Eventually(b, 30*time.Second, func() bool {
			n, _, _ := voiceclient.Loud(u.Heard(), since)
			return n >= 15 // the agent is speaking
		}, "the agent did not answer")
		interrupt := phrases[i%len(phrases)]
		lead := speechOnset(interrupt)
		length := time.Duration(len(interrupt)) * time.Second / 16000
		before, _ := histogram(b, "alicia_voice_barge_in_stop_seconds")
		u.Say(tick)
		u.WaitSent() // the silence frame just went out: the next one goes 20 ms later, and holds the 20 ms before it
		onset := time.Now().Add(lead)
		u.Say(interrupt)
		reached := onset.Add(bargeMin)
		testkit.Eventually(b, 10*time.Second, func() bool { n, _ := histogram(b, "alicia_voice_barge_in_stop_seconds"); return n > before },
			"no barge-in")
		end := onset.Add(length - lead + 20*time.Millisecond)
		time.Sleep(time.Until(end)) // audio in flight has arrived; the next answer waits for the end-of-turn silence
		if last, ok := lastHeard(u.Heard(), onset, end.Add(300*time.Millisecond)); ok {
			lags = append(lags, last.Sub(reached))
		}
		// Lowered (ALICIA_BARGE_IN_DUCK_DB): the last frame within 12 dB of
		// the answer's loudest before the interruption.
		peak := -120.0
		for _, h := range u.Heard() {
			if h.At.After(onset.Add(-2*time.Second)) && h.At.Before(onset) {
				peak = max(peak, audio.DBFS(h.PCM))
			}
		}
		var lastFull time.Time
		for _, h := range u.Heard() {
			if !h.At.Before(onset) && h.At.Before(end.Add(300*time.Millisecond)) && audio.DBFS(h.PCM) > peak-12 {
				lastFull = h.At
			}
		}
		if !lastFull.IsZero() {
			lowered = append(lowered, lastFull.Sub(reached))
		}
		since = end
	}
	b.StopTimer()
	n, sum := histogram(b, "alicia_voice_barge_in_stop_seconds")
	if len(lags) == 0 {
		b.Fatal("no barge-in heard")
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	q := func(p float64) float64 { return float64(lags[int(p*float64(len(lags)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	if len(lowered) > 0 {
		sort.Slice(lowered, func(i, j int) bool { return lowered[i] < lowered[j] })
		b.ReportMetric(float64(lowered[len(lowered)/2].Microseconds())/1000, "lowered-p50-ms")
		b.ReportMetric(float64(lowered[(len(lowered)-1)*99/100].Microseconds())/1000, "lowered-p99-ms")
	}
	b.ReportMetric(float64(len(lags)), "barge-ins")
	b.ReportMetric((sum-sumStops)/float64(n-nStops)*1000, "agent-stop-mean-ms")
	b.ReportMetric(0, "ns/op")
}

// modelFloor is what the fake models' timing alone puts beyond the
// end-of-turn silence for an utterance of speech: transcribing it (with
// the 300 ms pre-roll, and the 100 ms of silence a speculative job holds or
// the 200 ms a final one keeps), the first token, the tokens up to the end
// of the first sentence (firstText: up to the word that ends it), the
// first audio — less the part of the silence a speculative turn hides it in.
func modelFloor(p fakeopenai.Profile, speech time.Duration, firstText string, speculation bool) time.Duration {
	cfg := roomagent.DefaultConfig()
	tail, hidden := 200*time.Millisecond, time.Duration(0)
	if speculation {
		tail, hidden = cfg.PauseAfter, cfg.EndSilence-cfg.PauseAfter
	}
	audioSec := (speech + 300*time.Millisecond + tail).Seconds()
	t := p.Transcription.Fixed + time.Duration(audioSec*float64(p.Transcription.PerAudioSecond)) + p.Chat.TimeToFirstToken + p.Speech.TimeToFirstAudio
	if p.Chat.TokensPerSecond > 0 {
		t += time.Duration(float64(fakeopenai.EstimateTokens(firstText)) / p.Chat.TokensPerSecond * float64(time.Second))
	}
	return max(0, t-hidden)
}
