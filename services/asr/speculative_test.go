package asr_test

import (
	"net/http"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/asr/internal/metrics"
	"github.com/alicia-voice/alicia/services/asr/internal/worker"
)

// core collects what the asr publishes on one core NATS subject.
type core struct {
	mu   sync.Mutex
	msgs []*nats.Msg
}

func (h *harness) listen(subject string) *core {
	h.t.Helper()
	c := &core{}
	sub, err := h.nc.Subscribe(subject, func(m *nats.Msg) {
		c.mu.Lock()
		c.msgs = append(c.msgs, m)
		c.mu.Unlock()
	})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.nc.Flush(); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = sub.Unsubscribe() })
	return c
}

func (c *core) all() []*nats.Msg {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*nats.Msg(nil), c.msgs...)
}

// envelope decodes the i-th message.
func (c *core) envelope(t *testing.T, i int) protocol.Envelope {
	t.Helper()
	env, err := protocol.Decode(c.all()[i].Data)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// settled waits until every queued job is acknowledged, then until the
// test's connection has everything the server sent it before: a
// speculative job publishes all it publishes before its ack.
func (h *harness) settled(t *testing.T) {
	t.Helper()
	testkit.Eventually(t, 5*time.Second, func() bool { return h.queued() == 0 }, "jobs acknowledged")
	if err := h.nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// speculative is the utterance's next job as the room-agent sends it when
// a silence begins: the audio so far, voiced up to voiced.
func (u *utterance) speculative(d, voiced time.Duration) *protocol.ASRJob {
	j := u.job(false, d)
	j.Speculative = protocol.Ptr(true)
	j.VoicedMs = protocol.Ptr(int32(voiced.Milliseconds()))
	return j
}

func checkMeta(t *testing.T, what string, env protocol.Envelope) {
	t.Helper()
	if env.Meta[edge.MetaUserID] != testUser || env.Meta[telemetry.MetaTraceID] != testTrace {
		t.Errorf("%s meta = %v", what, env.Meta)
	}
}

// A speculative job's transcript goes to the room-agent, and the
// UserMessage it would become to the llm, on core NATS; nothing of it
// reaches the conversation's stream. The user message is the one the final
// job then publishes on the stream.
func TestSpeculativeJob(t *testing.T) {
	for _, tc := range []struct {
		name    string
		silence bool
		text    string
		preempt bool
		outcome string
	}{
		{"words", false, fakeopenai.DefaultTranscript, true, "published"},
		{"nothing said", true, "", false, "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			fake := fakeopenai.New(t)
			h.replica(h.config(fake))
			cid := protocol.NewID("ac")
			rec := h.record(cid)
			transcripts, preempts := h.listen(subjects.SpecTranscript(cid)), h.listen(subjects.SpecPreempt(cid))
			jobs := metrics.Default().Jobs.WithLabelValues("speculative", tc.outcome)
			before := testutil.ToFloat64(jobs)

			u := newUtterance(cid)
			spec := u.speculative(1500*time.Millisecond, 1300*time.Millisecond)
			if tc.silence {
				spec.Data = make([]byte, len(spec.Data))
			}
			h.publish(spec)
			testkit.Eventually(t, 5*time.Second, func() bool { return len(transcripts.all()) == 1 }, "speculative transcript")
			h.settled(t)

			m := transcripts.all()[0]
			env := transcripts.envelope(t, 0)
			tr, ok := env.Body.(*protocol.Transcription)
			if !ok || m.Header.Get(worker.HeaderJob) != spec.ID || env.ConversationID != cid {
				t.Fatalf("on %s (job %q): %s %+v", m.Subject, m.Header.Get(worker.HeaderJob), env.Type, env.Body)
			}
			if tr.ID != u.id || tr.ConversationID != cid || tr.Final || tr.Text != tc.text || tr.Language == nil || *tr.Language != "en" {
				t.Errorf("speculative transcript %+v", tr)
			}
			checkMeta(t, "speculative transcript", env)
			if n := len(preempts.all()); n != map[bool]int{true: 1, false: 0}[tc.preempt] {
				t.Fatalf("%d speculative user messages", n)
			}
			if got := testutil.ToFloat64(jobs); got != before+1 {
				t.Errorf("speculative jobs %q counted %v, want %v", tc.outcome, got, before+1)
			}

			// The turn ends: the final job, transcribed as before.
			final := u.job(true, 1500*time.Millisecond)
			final.Data = spec.Data
			h.publish(final)
			testkit.Eventually(t, 5*time.Second, func() bool { return rec.final() != nil && h.queued() == 0 }, "final transcription")
			if tc.preempt {
				testkit.Eventually(t, 5*time.Second, func() bool { return len(rec.userMessages()) == 1 }, "user message")
			}
			// Nothing before the final job's own envelopes: the speculative
			// job was done (acknowledged) before the final one was queued.
			all := rec.all()
			if all[0].Env.Type != protocol.TypeTranscription || !all[0].Env.Body.(*protocol.Transcription).Final {
				t.Errorf("the stream begins with %s %+v, not the final transcription", all[0].Env.Type, all[0].Env.Body)
			}
			if want := map[bool]int{true: 2, false: 1}[tc.preempt]; len(all) != want {
				t.Errorf("%d envelopes on the stream, want %d", len(all), want)
			}
			if !tc.preempt {
				return
			}
			penv := preempts.envelope(t, 0)
			pm := preempts.all()[0]
			if pm.Header.Get(worker.HeaderJob) != spec.ID || penv.StanzaID != 0 {
				t.Errorf("speculative user message of job %q, stanza %d", pm.Header.Get(worker.HeaderJob), penv.StanzaID)
			}
			checkMeta(t, "speculative user message", penv)
			got := *penv.Body.(*protocol.UserMessage)
			want := *rec.userMessages()[0].Env.Body.(*protocol.UserMessage)
			if got.Timestamp == nil || *got.Timestamp != spec.CreatedAt {
				t.Errorf("speculative user message timestamp %v, want the job's creation %d", got.Timestamp, spec.CreatedAt)
			}
			// The same message, but for the time: the final one's is when the
			// end-pointer decided the user stopped.
			got.Timestamp, want.Timestamp = nil, nil
			if !reflect.DeepEqual(got, want) || penv.Type != protocol.TypeUserMessage || penv.ConversationID != cid {
				t.Errorf("speculative user message %+v, the final one %+v", got, want)
			}
		})
	}
}

// A final job that carries its speculative job's transcript is not
// transcribed again, and publishes what a transcribed one would have.
func TestFinalWithTranscript(t *testing.T) {
	h := newHarness(t)
	fake := fakeopenai.New(t)
	h.replica(h.config(fake)) // confidence floor 0.3
	m := metrics.Default()

	// The reference: a final job transcribed by the backend.
	ref := protocol.NewID("ac")
	refRec := h.record(ref)
	refJob := newUtterance(ref).job(true, time.Second)
	h.publish(refJob)
	testkit.Eventually(t, 5*time.Second, func() bool { return len(refRec.userMessages()) == 1 }, "reference user message")
	refAll := refRec.all()
	refTr := refRec.final()
	if refTr.Confidence == nil || fake.TranscriptionCount() != 1 {
		t.Fatalf("reference transcription %+v after %d requests", refTr, fake.TranscriptionCount())
	}

	for _, tc := range []struct {
		name        string
		text        string
		conf        *float64
		userMessage bool
	}{
		{"as transcribed", refTr.Text, refTr.Confidence, true},
		{"below the floor", "uh thank you", protocol.Ptr(0.15), false},
		{"nothing said", "", nil, false},
		{"no confidence", "Lights off.", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requests := fake.TranscriptionCount()
			reused := testutil.ToFloat64(m.Reused.WithLabelValues("speculative"))
			endToFinal := sampleCount(t, m.SpeechEndToFinal)
			cid := protocol.NewID("ac")
			rec := h.record(cid)
			j := newUtterance(cid).job(true, time.Second)
			j.Transcript, j.TranscriptConfidence = &tc.text, tc.conf
			h.publish(j)
			testkit.Eventually(t, 5*time.Second, func() bool { return rec.final() != nil && h.queued() == 0 }, "final transcription")
			if tc.userMessage {
				testkit.Eventually(t, 5*time.Second, func() bool { return len(rec.userMessages()) == 1 }, "user message")
			}
			// A later utterance's transcription follows anything else of this one.
			h.publish(newUtterance(cid).job(true, time.Second))
			testkit.Eventually(t, 5*time.Second, func() bool { return len(rec.transcriptions()) == 2 && h.queued() == 0 }, "next utterance")
			if n := fake.TranscriptionCount() - requests; n != 1 {
				t.Errorf("%d transcription requests, want 1 (the next utterance's only)", n)
			}
			if got := testutil.ToFloat64(m.Reused.WithLabelValues("speculative")); got != reused+1 {
				t.Errorf("reused speculative transcripts counted %v, want %v", got, reused+1)
			}
			if n := sampleCount(t, m.SpeechEndToFinal); n != endToFinal+2 {
				t.Errorf("end of speech → final observed %d more times, want 2", n-endToFinal)
			}

			var mine []stored
			for _, s := range rec.all() {
				if id := bodyID(s.Env.Body); id == j.UtteranceID {
					mine = append(mine, s)
				}
			}
			if want := map[bool]int{true: 2, false: 1}[tc.userMessage]; len(mine) != want {
				t.Fatalf("%d envelopes of the utterance, want %d", len(mine), want)
			}
			tr := mine[0].Env.Body.(*protocol.Transcription)
			if !tr.Final || tr.Text != tc.text || tr.Language == nil || *tr.Language != "en" ||
				!reflect.DeepEqual(tr.Confidence, tc.conf) || mine[0].Header.Get(worker.HeaderJobSequence) == "" {
				t.Errorf("final transcription %+v", tr)
			}
			if !tc.userMessage {
				return
			}
			um := mine[1].Env.Body.(*protocol.UserMessage)
			if um.Content != tc.text || um.Timestamp == nil || *um.Timestamp != *j.SpeechEndMs {
				t.Errorf("user message %+v", um)
			}
			if tc.name != "as transcribed" {
				return
			}
			// Field by field what the reference published, but for the ids
			// and the time.
			for i, want := range []string{subjects.Server(cid, protocol.TypeTranscription), subjects.Client(cid, protocol.TypeUserMessage)} {
				if mine[i].Subject != want || mine[i].Env.Type != refAll[i].Env.Type {
					t.Errorf("envelope %d: %s on %s, want %s on %s", i, mine[i].Env.Type, mine[i].Subject, refAll[i].Env.Type, want)
				}
				checkMeta(t, mine[i].Env.Type.String(), mine[i].Env)
			}
			wantTr := *refTr
			wantTr.ID, wantTr.ConversationID = j.UtteranceID, cid
			if !reflect.DeepEqual(*tr, wantTr) {
				t.Errorf("final transcription %+v, the reference %+v", *tr, wantTr)
			}
			wantUM := *refRec.userMessages()[0].Env.Body.(*protocol.UserMessage)
			wantUM.ID, wantUM.ConversationID, wantUM.Timestamp = j.UtteranceID, cid, j.SpeechEndMs
			if !reflect.DeepEqual(*um, wantUM) {
				t.Errorf("user message %+v, the reference %+v", *um, wantUM)
			}
		})
	}
}

func bodyID(b protocol.Body) string {
	switch b := b.(type) {
	case *protocol.Transcription:
		return b.ID
	case *protocol.UserMessage:
		return b.ID
	}
	return ""
}

// A speculative job whose speech an in-flight partial of its utterance
// covers waits for that partial's transcript instead of sending the same
// audio to the backend again; one that is not covered, or whose partial
// fails, is transcribed.
func TestSpeculativeReusesPartial(t *testing.T) {
	const partialText = "turn the lights"
	for _, tc := range []struct {
		name     string
		partial  time.Duration // the partial's audio
		fails    bool          // the partial's transcription fails
		requests int           // transcription requests in all
		source   string        // how the speculative transcript was reused ("": not)
		text     string
	}{
		{"covered", 1000 * time.Millisecond, false, 1, "partial", partialText},
		{"speech beyond the partial", 800 * time.Millisecond, false, 2, "", fakeopenai.DefaultTranscript},
		{"partial fails", 1000 * time.Millisecond, true, 2, "partial_failed", fakeopenai.DefaultTranscript},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			fake := fakeopenai.New(t)
			// The partial's transcription is held until the test lets it go.
			release := make(chan struct{})
			letGo := sync.OnceFunc(func() { close(release) })
			t.Cleanup(letGo) // before the fake's own cleanup
			fake.SetTranscriber(func(r fakeopenai.TranscriptionRequest) fakeopenai.Transcript {
				if r.Duration != tc.partial {
					return fakeopenai.Transcript{Text: fakeopenai.DefaultTranscript}
				}
				<-release
				if tc.fails {
					return fakeopenai.Transcript{Status: http.StatusServiceUnavailable}
				}
				return fakeopenai.Transcript{Text: partialText}
			})
			cfg := h.config(fake)
			cfg.Concurrency = 2
			h.replica(cfg)
			cid := protocol.NewID("ac")
			rec := h.record(cid)
			transcripts, preempts := h.listen(subjects.SpecTranscript(cid)), h.listen(subjects.SpecPreempt(cid))
			m := metrics.Default()
			reused := map[string]float64{}
			for _, s := range []string{"partial", "partial_failed"} {
				reused[s] = testutil.ToFloat64(m.Reused.WithLabelValues(s))
			}

			u := newUtterance(cid)
			h.publish(u.job(false, tc.partial))
			testkit.Eventually(t, 5*time.Second, func() bool { return fake.TranscriptionCount() == 1 }, "partial at the backend")
			spec := u.speculative(1200*time.Millisecond, 900*time.Millisecond)
			h.publish(spec)
			if tc.source != "" {
				testkit.Eventually(t, 5*time.Second, func() bool { return testutil.ToFloat64(m.ReuseWaiting) == 1 }, "speculative job waiting for the partial")
			} else {
				testkit.Eventually(t, 5*time.Second, func() bool { return len(transcripts.all()) == 1 }, "speculative transcript while the partial is held")
			}
			letGo()
			testkit.Eventually(t, 5*time.Second, func() bool { return len(transcripts.all()) == 1 }, "speculative transcript")
			h.settled(t)

			if n := fake.TranscriptionCount(); n != tc.requests {
				t.Errorf("%d transcription requests, want %d", n, tc.requests)
			}
			env := transcripts.envelope(t, 0)
			if tr := env.Body.(*protocol.Transcription); tr.Text != tc.text || tr.ID != u.id || tr.Final {
				t.Errorf("speculative transcript %+v, want %q", tr, tc.text)
			}
			if n := len(preempts.all()); n != 1 {
				t.Errorf("%d speculative user messages", n)
			} else if um := preempts.envelope(t, 0).Body.(*protocol.UserMessage); um.Content != tc.text || um.ID != u.id {
				t.Errorf("speculative user message %+v", um)
			}
			for s, before := range reused {
				want := before
				if s == tc.source {
					want++
				}
				if got := testutil.ToFloat64(m.Reused.WithLabelValues(s)); got != want {
					t.Errorf("reused %q counted %v, want %v", s, got, want)
				}
			}
			if n := testutil.ToFloat64(m.ReuseWaiting); n != 0 {
				t.Errorf("%v speculative jobs still waiting", n)
			}
			// The partial is shown to the client as ever (unless it failed);
			// the speculative transcript is not.
			if tc.fails {
				if trs := rec.transcriptions(); len(trs) != 0 {
					t.Errorf("transcriptions on the stream %q", texts(trs))
				}
				return
			}
			testkit.Eventually(t, 5*time.Second, func() bool { return len(rec.transcriptions()) >= 1 }, "the partial on the stream")
			if got := texts(rec.transcriptions()); !reflect.DeepEqual(got, []string{partialText}) {
				t.Errorf("transcriptions on the stream %q, want the partial's only", got)
			}
		})
	}
}
