package voice_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/voiceclient"
	"github.com/alicia-voice/alicia/services/llm"
	roomagent "github.com/alicia-voice/alicia/services/room-agent"
)

// BenchmarkVoiceToVoiceJudge: voice-to-voice and first-sentence latency
// with the judge of answers off and on, in one run (issue 29, item 2: the
// judge adds nothing to the voice path). Two stacks run side by side, the
// same but for the llm's judge: off (ALICIA_JUDGE_SAMPLE=0) and on (every
// answer judged, sample 1, by a judge model of its own: a fake that scores
// from the question and answer, with the gpu-box profile). Every model is
// timed by the gpu-box profile. Each iteration is a round of one turn on
// each stack, the order alternating from round to round, so that what else
// the machine does falls on both. A turn ends when its last sentence has
// played out; the judge works while the answer is synthesized and played.
//
// voice-to-voice: the agent's end-of-turn decision → the answer's first
// frame written to its track (as BenchmarkVoiceToVoice). first-sentence:
// the asr's UserMessage published → the llm's first AssistantSentence
// (the answer may have started at a pause, speculatively). judged: the
// judgements published (TurnJudgement) by the stack with the judge on; the
// one with it off must publish none.
func BenchmarkVoiceToVoiceJudge(b *testing.B) {
	const question = "What will the weather be like tomorrow?"
	const answer = "It will be sunny tomorrow. Enjoy your day!" // two sentences: the turn ends when the second has played
	sides := []*judgeSide{newJudgeSide(b, "off", question, answer, false), newJudgeSide(b, "on", question, answer, true)}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		order := sides
		if i%2 == 1 {
			order = []*judgeSide{sides[1], sides[0]}
		}
		for _, s := range order {
			s.turn(b)
		}
	}
	b.StopTimer()
	off, on := sides[0], sides[1]
	// Every answer of the stack with the judge on is judged (after the
	// turn, off its path); the other stack has no judge.
	testkit.Eventually(b, 60*time.Second, func() bool { return on.judgedCount() >= b.N }, "every answer judged")
	if n := off.judgedCount(); n != 0 {
		b.Fatalf("the stack with the judge off published %d judgements", n)
	}
	for _, s := range sides {
		s.report(b)
	}
	b.ReportMetric(float64(on.judgedCount()), "judged")
	b.ReportMetric(float64(b.N), "turns/condition")
	b.ReportMetric(0, "ns/op")
}

// judgeSide is one stack of BenchmarkVoiceToVoiceJudge with its user.
type judgeSide struct {
	name  string
	s     *stack
	u     *voiceclient.User
	utter []int16

	mu      sync.Mutex
	v2v     []time.Duration
	first   []time.Duration
	heardAt time.Time // the last UserMessage, until its first sentence
	judged  int
}

func newJudgeSide(b *testing.B, name, question, answer string, judge bool) *judgeSide {
	j := &judgeSide{name: name}
	o := options{profile: fakeopenai.GPUBox, answer: answer, agent: func(c *roomagent.Config) {
		c.OnVoiceToVoice = func(d time.Duration) { j.mu.Lock(); j.v2v = append(j.v2v, d); j.mu.Unlock() }
	}}
	if judge {
		jm := fakeopenai.New(b, fakeopenai.WithResponder(voiceJudge), fakeopenai.WithProfile(fakeopenai.GPUBox))
		o.llm = func(c *llm.Config) { c.Judge.Sample, c.Judge.URL, c.Judge.Model = 1, jm.URL(), "fake-judge" }
	}
	j.s = newStack(b, o)
	cid := j.s.conversation()
	j.watch(b, cid)
	j.u = voiceclient.Join(b, j.s.lk.URL, j.s.token(cid), true)
	j.u.Configure(voiceConfig(cid), cid)
	// As with real models, the transcript grows with the audio.
	j.utter = trim(voiceclient.Speech(b, question))
	speech := audio.FramesDuration(len(j.utter), 16000)
	j.s.speech.SetTranscriber(fakeopenai.Growing(question, speech/time.Duration(len(strings.Fields(question)))))
	return j
}

// watch stamps the conversation's UserMessages and first sentences, and
// counts the stack's judgements, as NATS delivers them.
func (j *judgeSide) watch(b *testing.B, cid string) {
	sub := func(subject string, f func(protocol.Envelope, time.Time)) {
		s, err := j.s.nc.Subscribe(subject, func(m *nats.Msg) {
			at := time.Now()
			if env, err := protocol.Decode(m.Data); err == nil {
				f(env, at)
			}
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Unsubscribe() })
	}
	sub(subjects.Client(cid, protocol.TypeUserMessage), func(_ protocol.Envelope, at time.Time) {
		j.mu.Lock()
		j.heardAt = at
		j.mu.Unlock()
	})
	sub(subjects.Server(cid, protocol.TypeAssistantSentence), func(_ protocol.Envelope, at time.Time) {
		j.mu.Lock()
		if !j.heardAt.IsZero() {
			j.first = append(j.first, at.Sub(j.heardAt))
			j.heardAt = time.Time{}
		}
		j.mu.Unlock()
	})
	sub(subjects.AllOfType(subjects.OriginAgent, protocol.TypeTurnJudgement), func(protocol.Envelope, time.Time) {
		j.mu.Lock()
		j.judged++
		j.mu.Unlock()
	})
}

// turn says the question and waits for the answer's voice, its first
// sentence's stamp, and its last sentence played out.
func (j *judgeSide) turn(b *testing.B) {
	j.mu.Lock()
	nv, nf := len(j.v2v), len(j.first)
	j.mu.Unlock()
	seen := len(j.u.Received())
	j.u.Say(j.utter)
	testkit.Eventually(b, 20*time.Second, func() bool {
		j.mu.Lock()
		defer j.mu.Unlock()
		return len(j.v2v) > nv && len(j.first) > nf
	}, fmt.Sprintf("judge=%s: no answer audio or first sentence", j.name))
	testkit.Eventually(b, 20*time.Second, func() bool {
		for _, e := range j.u.Received()[seen:] {
			if p, ok := e.Body.(*protocol.SentencePlayout); ok && p.Status == protocol.SentencePlayoutStatusPlayed && p.Sequence == 2 {
				return true
			}
		}
		return false
	}, fmt.Sprintf("judge=%s: the answer did not play out", j.name))
}

func (j *judgeSide) judgedCount() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.judged
}

// report puts p50 and p95 of both figures, by condition.
func (j *judgeSide) report(b *testing.B) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, f := range []struct {
		name string
		d    []time.Duration
	}{{"v2v", j.v2v}, {"first-sentence", j.first}} {
		d := slices.Clone(f.d)
		if len(d) == 0 {
			b.Fatalf("judge=%s: no %s figures", j.name, f.name)
		}
		slices.Sort(d)
		q := func(p float64) float64 { return float64(d[int(p*float64(len(d)-1))].Microseconds()) / 1000 }
		b.ReportMetric(q(0.5), fmt.Sprintf("%s-%s-p50-ms", j.name, f.name))
		b.ReportMetric(q(0.95), fmt.Sprintf("%s-%s-p95-ms", j.name, f.name))
	}
}

// voiceJudge is a judge model that scores from the question and the answer
// in its prompt (internal/judge.PromptFor): relevant when the answer takes
// up a word of the question; correct and faithful when it states no number
// (there are no tool results to take one from).
func voiceJudge(req fakeopenai.Request) fakeopenai.Turn {
	p := req.LastUser()
	question, rest, _ := strings.Cut(strings.TrimPrefix(p, "Question:\n"), "\n\nTool results:\n")
	_, answer, _ := strings.Cut(rest, "\nAnswer:\n")
	relevant, why := 0.0, "it does not take up the question"
	for _, w := range strings.Fields(strings.ToLower(question)) {
		if w = strings.Trim(w, "?.!,"); len(w) > 3 && strings.Contains(strings.ToLower(answer), w) {
			relevant, why = 1, "it answers about "+w
		}
	}
	faithful := 1.0
	if strings.ContainsAny(answer, "0123456789") {
		faithful, why = 0, "it states a number no tool gave"
	}
	return fakeopenai.Text(fmt.Sprintf(`{"correctness": %g, "faithfulness": %g, "relevancy": %g, "rationale": "The answer: %s."}`,
		faithful, faithful, relevant, why))
}
