package voice_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/voiceclient"
	"github.com/alicia-voice/alicia/services/gateway"
	roomagent "github.com/alicia-voice/alicia/services/room-agent"
)

// The abuse benchmark's load (issue 26): ordinary users, each holding a
// text conversation with a message every abuseTextEvery, the first
// abuseVoiceUsers of them also a voice conversation with an utterance every
// abuseVoiceEvery; each phase lasts ALICIA_BENCH_ABUSE_PHASE (default 40s).
const (
	abuseUsers      = 20
	abuseVoiceUsers = 4
	abuseTextEvery  = 4 * time.Second
	abuseVoiceEvery = 10 * time.Second
	abuseTurnWait   = time.Minute // a turn unanswered for longer counts as unanswered
)

func abuseKey(user string) string { return "abuse-" + user + "-key-0123456789" }

// BenchmarkAbuse: 20 ordinary users hold text conversations (4 of them
// also voice conversations through LiveKit) for one phase alone, then for
// another while one more user, with an ordinary API key, floods audio,
// text, conversations and turns as fast as the edges take them (flooder).
// The models are fakes with the gpu-box timing. It reports the ordinary
// users' first sentence (UserMessage sent → first AssistantSentence
// received) and voice-to-voice (end of speech sent → first answer audio
// heard; and inside the agent, its end-of-turn decision → first frame)
// p50/p99 in both phases; the envelopes acknowledged to them (every
// UserMessage the edge did not refuse, every final Transcription the
// agent sent) missing from alicia_messages once persistence has applied
// the whole stream; and the flooder's envelopes sent and refused by code
// and budget, and its stored bytes next to the stored budget. The gateway's
// quotas are the defaults, or what ALICIA_BUDGET_*, ALICIA_EDGE_*,
// ALICIA_WS_CONNECTIONS_PER_USER say. Run with -benchtime 1x.
func BenchmarkAbuse(b *testing.B) {
	phase := 40 * time.Second
	if v := os.Getenv("ALICIA_BENCH_ABUSE_PHASE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("ALICIA_BENCH_ABUSE_PHASE %q: %v", v, err)
		}
		phase = d
	}
	var users []string
	for i := range abuseUsers {
		users = append(users, fmt.Sprintf("user%02d", i))
	}
	keys := []string{}
	for _, u := range append(slices.Clone(users), "flooder") {
		keys = append(keys, u+":"+abuseKey(u))
	}
	var quotas gateway.Quotas
	var v2vMu sync.Mutex
	var agentV2V *[]time.Duration // the running phase's
	s := newStack(b, options{profile: fakeopenai.GPUBox,
		agent: func(c *roomagent.Config) {
			c.OnVoiceToVoice = func(d time.Duration) {
				v2vMu.Lock()
				defer v2vMu.Unlock()
				if agentV2V != nil {
					*agentV2V = append(*agentV2V, d)
				}
			}
		},
		gateway: func(c *gateway.Config) {
			c.APIKeys = strings.Join(keys, ",")
			if err := c.QuotasFromEnv(); err != nil {
				b.Fatal(err)
			}
			quotas = c.Quotas
		}})
	budgets := quotas.Budgets.WithDefaults()
	utter := voiceclient.Speech(b, "What will the weather be like in Paris tomorrow?")
	var ordinary []*abuseUser
	for i, name := range users {
		ordinary = append(ordinary, joinAbuseUser(b, s, name, i < abuseVoiceUsers))
	}
	for _, u := range ordinary { // warm: every conversation's first turn
		if t := u.turn(); t.first.IsZero() {
			b.Fatalf("%s's first turn was not answered (refused with %d)", u.name, t.refused)
		}
		if u.voice != nil {
			if v := u.utter(utter); v.heard.IsZero() {
				b.Fatalf("%s's first utterance was not answered", u.name)
			}
		}
	}
	run := func(flood bool) (*abuseLoad, *flooder) {
		load := &abuseLoad{}
		v2vMu.Lock()
		agentV2V = &load.agentV2V
		v2vMu.Unlock()
		var f *flooder
		var halt func()
		if flood {
			f = newFlooder(s.base, abuseKey("flooder"), budgets.MessageChars, quotas.ConnectionsPerUser)
			halt = f.run()
		}
		load.run(ordinary, utter, phase)
		if halt != nil {
			halt()
		}
		v2vMu.Lock()
		agentV2V = nil
		v2vMu.Unlock()
		return load, f
	}
	var quiet, flooded []*abuseLoad
	var fl []*flooder
	b.ResetTimer()
	for range b.N {
		q, _ := run(false)
		l, f := run(true)
		quiet, flooded, fl = append(quiet, q), append(flooded, l), append(fl, f)
	}
	b.StopTimer()

	discarded := s.settle(b)
	var acked []string
	for _, l := range slices.Concat(quiet, flooded) {
		acked = append(acked, l.acknowledged()...)
	}
	lost := s.missingMessages(b, acked)
	stored := s.storedBytes(b, "flooder")

	qm, fm := merge(quiet), merge(flooded)
	report := func(prefix string, m *abuseLoad) (p99 float64) {
		first, start := m.firsts()
		v2v := m.voiceToVoice()
		b.ReportMetric(q(first, .5), prefix+"-first-p50-ms")
		b.ReportMetric(q(first, .99), prefix+"-first-p99-ms")
		b.ReportMetric(q(start, .5), prefix+"-start-p50-ms")
		b.ReportMetric(q(start, .99), prefix+"-start-p99-ms")
		b.ReportMetric(m.cores, prefix+"-cores")
		b.ReportMetric(m.stalled*100, prefix+"-cpu-stalled-%")
		b.ReportMetric(q(v2v, .5), prefix+"-v2v-p50-ms")
		b.ReportMetric(q(v2v, .99), prefix+"-v2v-p99-ms")
		agent := durMs(m.agentV2V)
		b.ReportMetric(q(agent, .5), prefix+"-agent-v2v-p50-ms")
		b.ReportMetric(q(agent, .99), prefix+"-agent-v2v-p99-ms")
		b.ReportMetric(float64(len(first)), prefix+"-turns")
		b.ReportMetric(float64(len(v2v)), prefix+"-utterances")
		b.ReportMetric(float64(m.unanswered()), prefix+"-unanswered")
		b.ReportMetric(float64(m.refused()), prefix+"-refused")
		return q(first, .99)
	}
	qp99, fp99 := report("quiet", qm), report("flood", fm)
	b.ReportMetric(fp99/qp99, "first-p99-ratio")
	b.ReportMetric(float64(len(acked)), "acknowledged")
	b.ReportMetric(float64(len(lost)), "lost")
	b.ReportMetric(float64(discarded), "stream-discarded")
	sent, refused, sentBytes := fl[0].report()
	for k, v := range sent {
		b.ReportMetric(float64(v), "flooder-sent-"+k)
	}
	for k, v := range refused {
		b.ReportMetric(float64(v), "flooder-refused-"+strings.ReplaceAll(k, " ", "_"))
	}
	b.ReportMetric(float64(sentBytes["audio"]+sentBytes["text"])/(1<<20), "flooder-sent-MB")
	b.ReportMetric(float64(stored.total())/(1<<20), "flooder-stored-MB")
	b.ReportMetric(float64(stored.messages)/(1<<20), "flooder-stored-messages-MB")
	b.ReportMetric(float64(stored.sentences)/(1<<20), "flooder-stored-sentences-MB")
	b.ReportMetric(float64(stored.audio)/(1<<20), "flooder-stored-audio-MB")
	b.ReportMetric(float64(stored.conversations), "flooder-conversations")
	if budgets.StoredBytes > 0 {
		b.ReportMetric(float64(budgets.StoredBytes)/(1<<20), "stored-budget-MB")
	}
	b.ReportMetric(0, "ns/op")
	b.Logf("phase %s; first sentence p99 %.0f ms quiet, %.0f ms flooded (%.2f×); %d envelopes acknowledged to ordinary users, %d lost %v; "+
		"flooder sent %v refused %v, stores %s of %s",
		phase, qp99, fp99, fp99/qp99, len(acked), len(lost), lost, sent, refused, fmtMB(stored.total()), fmtMB(budgets.StoredBytes))
}

// abuseUser is one ordinary user: a text conversation on a WebSocket and,
// for some, a voice conversation in a LiveKit room.
type abuseUser struct {
	name string
	text *wsConn
	in   chan protocol.Envelope
	tb   testing.TB

	voice *voiceclient.User
}

func joinAbuseUser(b *testing.B, s *stack, name string, voice bool) *abuseUser {
	b.Helper()
	u := &abuseUser{name: name, in: make(chan protocol.Envelope, 4096), tb: b}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := dialWS(ctx, s.base, abuseKey(name), func(e protocol.Envelope) { u.in <- e })
	if err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	b.Cleanup(w.close)
	u.text = w
	if err := w.send(ctx, &protocol.Configuration{Features: []protocol.ConfigurationFeaturesElem{protocol.ConfigurationFeaturesElemStreaming}}); err != nil {
		b.Fatal(err)
	}
	for w.cid == "" {
		select {
		case e := <-u.in:
			if c, ok := e.Body.(*protocol.Configuration); ok && c.ConversationID != nil {
				w.cid = *c.ConversationID
			}
		case <-ctx.Done():
			b.Fatalf("%s: no Configuration answer", name)
		}
	}
	if !voice {
		return u
	}
	var c struct {
		ID string `json:"id"`
	}
	var tok struct{ URL, Token, Room, Identity string }
	if resp, err := restCall(ctx, s.base, abuseKey(name), http.MethodPost, "/v1/conversations", &c); err != nil || resp.StatusCode/100 != 2 {
		b.Fatalf("%s: new conversation: %v %v", name, resp, err)
	}
	if resp, err := restCall(ctx, s.base, abuseKey(name), http.MethodPost, "/v1/conversations/"+c.ID+"/token", &tok); err != nil || resp.StatusCode/100 != 2 {
		b.Fatalf("%s: room token: %v %v", name, resp, err)
	}
	u.voice = voiceclient.Join(b, s.lk.URL, tok.Token, true)
	u.voice.Configure(voiceConfig(c.ID), c.ID)
	return u
}

// textTurn is one UserMessage: when it was sent, when the first sentence
// of its answer arrived (zero: none within abuseTurnWait), and the code of
// an ErrorMessage about it (0: none).
type textTurn struct {
	id                 string
	sent, start, first time.Time // start: StartAnswer received (the llm took the turn)
	refused            int32
}

// edgeRefused reports whether the edge refused the message (nothing
// published): a rate, a budget, or invalid input. Other errors (a model
// backend failing the answer) come after the message was stored.
func (t textTurn) edgeRefused() bool {
	return t.refused != 0 && (t.refused < 500 || t.refused == protocol.CodeOverloaded || t.refused == protocol.CodeOverBudget)
}

// turn sends a message and reads until its answer's final sentence.
func (u *abuseUser) turn() textTurn {
	t := textTurn{id: protocol.NewID("am"), sent: time.Now()}
	ctx, cancel := context.WithTimeout(context.Background(), abuseTurnWait)
	defer cancel()
	if err := u.text.send(ctx, &protocol.UserMessage{ID: t.id, ConversationID: u.text.cid, Content: "How is the weather today?",
		Timestamp: protocol.Ptr(t.sent.UnixMilli())}); err != nil {
		u.tb.Errorf("%s: send: %v", u.name, err)
		t.refused = -1
		return t
	}
	var start string
	for {
		select {
		case e := <-u.in:
			switch b := e.Body.(type) {
			case *protocol.StartAnswer:
				if b.PreviousID == t.id {
					start, t.start = b.ID, time.Now()
				}
			case *protocol.AssistantSentence:
				if start == "" || b.PreviousID != start {
					continue
				}
				if t.first.IsZero() {
					t.first = time.Now()
				}
				if b.IsFinal != nil && *b.IsFinal {
					return t
				}
			case *protocol.ErrorMessage:
				if b.OriginatingID == nil || *b.OriginatingID == t.id {
					u.tb.Logf("%s: ErrorMessage %d about %s: %s", u.name, b.Code, t.id, b.Message)
					t.refused = b.Code
					return t
				}
			}
		case <-ctx.Done():
			return t
		}
	}
}

// voiceTurn is one utterance: when its last audio was sent, when the
// answer's first audio was heard (zero: none), and the ids of the final
// transcriptions the agent sent for it (the UserMessages it published).
type voiceTurn struct {
	end, heard time.Time
	ids        []string
}

// utter speaks and waits until the answer has played out.
func (u *abuseUser) utter(pcm []int16) voiceTurn {
	seen := len(u.voice.Received())
	u.voice.Say(pcm)
	u.voice.WaitSent()
	v := voiceTurn{end: time.Now()}
	_ = testkit.CheckFor(abuseTurnWait, testkit.PollInterval, func() error {
		if n, first, _ := voiceclient.Loud(u.voice.Heard(), v.end); n > 0 {
			v.heard = first
			return nil
		}
		return errorf("no answer heard")
	})
	err := testkit.CheckFor(abuseTurnWait, testkit.PollInterval, func() error {
		v.ids = nil
		var answer string
		var sentences int32
		var final bool
		for _, e := range u.voice.Received()[seen:] {
			switch b := e.Body.(type) {
			case *protocol.Transcription:
				if b.Final {
					v.ids = append(v.ids, b.ID)
				}
			case *protocol.StartAnswer:
				if slices.Contains(v.ids, b.PreviousID) {
					answer = b.ID
				}
			case *protocol.AssistantSentence:
				if answer != "" && b.PreviousID == answer {
					if b.Text != "" {
						sentences++
					}
					final = final || (b.IsFinal != nil && *b.IsFinal)
				}
			case *protocol.SentencePlayout:
				if final && b.MessageID == answer && b.Sequence == sentences && b.Status != protocol.SentencePlayoutStatusPlaying {
					return nil
				}
			}
		}
		return errorf("the answer has not played out")
	})
	if err != nil {
		u.tb.Logf("%s: utterance: %v", u.name, err)
	}
	return v
}

// abuseLoad is what the ordinary users did in one phase.
type abuseLoad struct {
	// cores: this process's CPU (every service but livekit-server, and
	// the clients) over the phase; stalled: the share of the phase some
	// task on the machine waited for a CPU (/proc/pressure/cpu).
	cores, stalled float64

	mu       sync.Mutex
	text     []textTurn
	voice    []voiceTurn
	agentV2V []time.Duration
}

// run has every user send a message every abuseTextEvery and the voice
// users speak every abuseVoiceEvery (random phase) for d; a turn that
// takes longer than its period delays the next, never two at once.
func (l *abuseLoad) run(users []*abuseUser, utter []int16, d time.Duration) {
	began, cpu, stall := time.Now(), procCPU(users[0].tb, os.Getpid()), cpuStall(users[0].tb)
	defer func() {
		took := time.Since(began)
		l.cores = (procCPU(users[0].tb, os.Getpid()) - cpu).Seconds() / took.Seconds()
		l.stalled = (cpuStall(users[0].tb) - stall).Seconds() / took.Seconds()
	}()
	end := time.Now().Add(d)
	every := func(period time.Duration, do func()) func() {
		return func() {
			next := time.Now().Add(rand.N(period))
			pace := time.NewTimer(time.Until(next)) // the load's pacing, not a wait for a condition
			defer pace.Stop()
			for {
				<-pace.C
				if time.Now().After(end) {
					return
				}
				do()
				if next = next.Add(period); next.Before(time.Now()) {
					next = time.Now()
				}
				pace.Reset(time.Until(next))
			}
		}
	}
	var wg sync.WaitGroup
	for _, u := range users {
		wg.Go(every(abuseTextEvery, func() {
			t := u.turn()
			l.mu.Lock()
			l.text = append(l.text, t)
			l.mu.Unlock()
		}))
		if u.voice != nil {
			wg.Go(every(abuseVoiceEvery, func() {
				v := u.utter(utter)
				l.mu.Lock()
				l.voice = append(l.voice, v)
				l.mu.Unlock()
			}))
		}
	}
	wg.Wait()
}

func merge(ls []*abuseLoad) *abuseLoad {
	m := &abuseLoad{}
	for _, l := range ls {
		m.cores, m.stalled = m.cores+l.cores/float64(len(ls)), m.stalled+l.stalled/float64(len(ls))
		m.text = append(m.text, l.text...)
		m.voice = append(m.voice, l.voice...)
		m.agentV2V = append(m.agentV2V, l.agentV2V...)
	}
	return m
}

// firsts are the answered turns' first-sentence latencies in ms, and
// their waits for StartAnswer (the llm taking the turn).
func (l *abuseLoad) firsts() (first, start []float64) {
	var d, st []time.Duration
	for _, t := range l.text {
		if !t.first.IsZero() {
			d = append(d, t.first.Sub(t.sent))
			st = append(st, t.start.Sub(t.sent))
		}
	}
	return durMs(d), durMs(st)
}

func (l *abuseLoad) voiceToVoice() []float64 {
	var d []time.Duration
	for _, v := range l.voice {
		if !v.heard.IsZero() {
			d = append(d, v.heard.Sub(v.end))
		}
	}
	return durMs(d)
}

func (l *abuseLoad) unanswered() (n int) {
	for _, t := range l.text {
		if t.first.IsZero() && t.refused == 0 {
			n++
		}
	}
	for _, v := range l.voice {
		if v.heard.IsZero() {
			n++
		}
	}
	return n
}

func (l *abuseLoad) refused() (n int) {
	for _, t := range l.text {
		if t.refused != 0 {
			n++
		}
	}
	return n
}

// acknowledged are the ids of what the system took from the users: every
// message the edge did not refuse, every utterance's final transcription.
func (l *abuseLoad) acknowledged() []string {
	var ids []string
	for _, t := range l.text {
		if !t.edgeRefused() {
			ids = append(ids, t.id)
		}
	}
	for _, v := range l.voice {
		ids = append(ids, v.ids...)
	}
	return ids
}

func durMs(d []time.Duration) []float64 {
	ms := make([]float64, len(d))
	for i, x := range d {
		ms[i] = float64(x.Microseconds()) / 1000
	}
	sort.Float64s(ms)
	return ms
}

// q is the p quantile of sorted values (0 with none).
func q(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(p*float64(len(sorted)-1))]
}

// cpuStall is the time some task has waited for a CPU since boot (the
// "some" line of /proc/pressure/cpu).
func cpuStall(tb testing.TB) time.Duration {
	tb.Helper()
	b, err := os.ReadFile("/proc/pressure/cpu")
	if err != nil {
		tb.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	_, total, _ := strings.Cut(line, "total=")
	us, err := strconv.ParseInt(strings.TrimSpace(total), 10, 64)
	if err != nil {
		tb.Fatalf("/proc/pressure/cpu %q: %v", line, err)
	}
	return time.Duration(us) * time.Microsecond
}

func fmtMB(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// settle waits until persistence has applied CONVERSATIONS up to its last
// message, and returns how many messages the stream discarded (its first
// sequence past 1: it is a limits stream, nothing else removes them).
func (s *stack) settle(b *testing.B) uint64 {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := s.js.Stream(ctx, bus.StreamConversations)
	if err != nil {
		b.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		b.Fatal(err)
	}
	testkit.EventuallyNoError(b, 10*time.Minute, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return rpc.WaitApplied(ctx, s.nc, bus.StreamConversations, info.State.LastSeq)
	}, "persistence applying the stream")
	return info.State.FirstSeq - 1
}

// missingMessages are the ids without a row in alicia_messages.
func (s *stack) missingMessages(b *testing.B, ids []string) []string {
	b.Helper()
	rows, err := s.pool.Query(context.Background(), `SELECT id FROM alicia_messages WHERE id = ANY($1)`, ids)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	found := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			b.Fatal(err)
		}
		found[id] = true
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	var missing []string
	for _, id := range ids {
		if !found[id] {
			missing = append(missing, id)
		}
	}
	return missing
}

// storedUsage is what a user stores, counted as the stored budget counts
// it (the gateway's usage query): message texts, sentences' text and
// audio, input and output audio of conversations not deleted, and
// memories.
type storedUsage struct {
	messages, sentences, audio, memory int64
	conversations                      int
}

func (u storedUsage) total() int64 { return u.messages + u.sentences + u.audio + u.memory }

const storedUsageSQL = `
WITH live AS (
    SELECT id FROM alicia_conversations WHERE user_id = $1 AND deleted_at IS NULL
)
SELECT
    (SELECT count(*) FROM live),
    coalesce((SELECT sum(octet_length(m.contents)) FROM alicia_messages m
              WHERE m.conversation_id IN (SELECT id FROM live) AND m.deleted_at IS NULL), 0),
    coalesce((SELECT sum(coalesce(octet_length(s.text), 0) + coalesce(octet_length(s.audio_data), 0))
              FROM alicia_sentences s JOIN alicia_messages m ON m.id = s.message_id
              WHERE m.conversation_id IN (SELECT id FROM live) AND s.deleted_at IS NULL), 0),
    coalesce((SELECT sum(coalesce(octet_length(a.audio_data), 0) + coalesce(octet_length(a.transcription), 0))
              FROM alicia_audio a WHERE a.conversation_id IN (SELECT id FROM live) AND a.deleted_at IS NULL), 0),
    coalesce((SELECT sum(octet_length(content)) FROM alicia_memory WHERE user_id = $1 AND deleted_at IS NULL), 0)`

func (s *stack) storedBytes(b *testing.B, user string) storedUsage {
	b.Helper()
	var u storedUsage
	if err := s.pool.QueryRow(context.Background(), storedUsageSQL, user).Scan(&u.conversations, &u.messages, &u.sentences, &u.audio, &u.memory); err != nil {
		b.Fatal(err)
	}
	return u
}
