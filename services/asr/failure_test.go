package asr_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// A backend that fails: after the quick retries the client hears
// ErrorMessage 503 (recoverable) for the utterance, the job is settled and
// not retried in a loop, and a partial's failure is dropped quietly.
func TestBackendFailure(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fault    fakeopenai.Fault
		attempts int // requests the backend sees for the final job
		code     int32
	}{
		{"500", fakeopenai.Fault{Status: http.StatusInternalServerError}, 3, protocol.CodeBackendUnavailable},
		{"429", fakeopenai.Fault{Status: http.StatusTooManyRequests}, 3, protocol.CodeBackendUnavailable},
		{"hangs past the timeout", fakeopenai.Fault{Hang: true}, 3, protocol.CodeBackendUnavailable},
		{"connection cut", fakeopenai.Fault{Down: true}, 3, protocol.CodeBackendUnavailable},
		{"wrong model (404)", fakeopenai.Fault{Status: http.StatusNotFound}, 1, protocol.CodeBackendUnavailable},
		{"audio refused (400)", fakeopenai.Fault{Status: http.StatusBadRequest}, 1, protocol.CodeInternal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			fake := fakeopenai.New(t)
			fake.SetTranscriptionFault(tc.fault)
			cfg := h.config(fake)
			cfg.Timeout = 150 * time.Millisecond
			h.replica(cfg)
			cid := protocol.NewID("ac")
			rec := h.record(cid)
			u := newUtterance(cid)
			h.publish(u.job(false, 500*time.Millisecond))
			testkit.Eventually(t, 5*time.Second, func() bool { return fake.TranscriptionCount() == 1 && h.queued() == 0 }, "partial tried")
			h.publish(u.job(true, time.Second))
			testkit.Eventually(t, 5*time.Second, func() bool { return len(rec.errors()) == 1 && h.queued() == 0 }, "error message")
			e := rec.errors()[0]
			if e.Code != tc.code || !e.Recoverable || e.OriginatingID == nil || *e.OriginatingID != u.id || e.ConversationID != cid || e.Message == "" {
				t.Errorf("error message %+v", e)
			}
			if n := fake.TranscriptionCount(); n != 1+tc.attempts {
				t.Errorf("%d requests, want the partial's one and %d for the final", n, tc.attempts)
			}
			if n := len(rec.transcriptions()) + len(rec.userMessages()); n != 0 {
				t.Errorf("%d transcriptions or user messages from a failing backend", n)
			}

			// Healed: the next utterance goes through.
			fake.SetTranscriptionFault(fakeopenai.Fault{})
			h.publish(newUtterance(cid).job(true, time.Second))
			testkit.Eventually(t, 5*time.Second, func() bool { return len(rec.userMessages()) == 1 }, "user message after recovery")
			if n := len(rec.errors()); n != 1 {
				t.Errorf("%d error messages", n)
			}
		})
	}
}

// A backend that is not there at all (connection refused).
func TestBackendDown(t *testing.T) {
	h := newHarness(t)
	fake := fakeopenai.New(t)
	cfg := h.config(fake)
	fake.Close()
	h.replica(cfg)
	cid := protocol.NewID("ac")
	rec := h.record(cid)
	h.publish(newUtterance(cid).job(true, time.Second))
	testkit.Eventually(t, 5*time.Second, func() bool { return len(rec.errors()) == 1 && h.queued() == 0 }, "error message")
	if e := rec.errors()[0]; e.Code != protocol.CodeBackendUnavailable || !e.Recoverable {
		t.Errorf("error message %+v", e)
	}
}

// Jobs the asr cannot read are reported to the conversation with the
// protocol's code and dead-lettered, not retried.
func TestMalformedJob(t *testing.T) {
	for _, tc := range []struct {
		name string
		data func(cid string) []byte
		code int32
	}{
		{"not msgpack", func(string) []byte { return []byte("RIFF....WAVEfmt ") }, protocol.CodeMalformed},
		{"not a job", func(cid string) []byte {
			b, _ := protocol.Encode(protocol.New(cid, &protocol.UserMessage{ID: protocol.NewID("am"), ConversationID: cid, Content: "hi"}))
			return b
		}, protocol.CodeUnknownType},
		{"unknown audio format", func(cid string) []byte {
			j := newUtterance(cid).job(true, time.Second)
			j.Format = "opus_48000"
			b, _ := protocol.Encode(protocol.New(cid, j))
			return b
		}, protocol.CodeInvalidBody},
		{"no audio", func(cid string) []byte {
			j := newUtterance(cid).job(true, time.Second)
			j.Data = nil
			b, _ := protocol.Encode(protocol.New(cid, j))
			return b
		}, protocol.CodeInvalidBody},
		{"another conversation's job", func(cid string) []byte {
			other := protocol.NewID("ac")
			b, _ := protocol.Encode(protocol.New(other, newUtterance(other).job(true, time.Second)))
			return b
		}, protocol.CodeInvalidBody},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			fake := fakeopenai.New(t)
			h.replica(h.config(fake))
			cid := protocol.NewID("ac")
			rec := h.record(cid)
			dlq, err := h.js.CreateConsumer(t.Context(), bus.StreamDeadLetter, jetstream.ConsumerConfig{FilterSubject: subjects.DeadLetter("asr")})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.js.Publish(t.Context(), subjects.ASRJob(cid), tc.data(cid)); err != nil {
				t.Fatal(err)
			}
			testkit.Eventually(t, 5*time.Second, func() bool { return len(rec.errors()) == 1 && h.queued() == 0 }, "error message")
			if e := rec.errors()[0]; e.Code != tc.code || !e.Recoverable {
				t.Errorf("error message %+v, want code %d", e, tc.code)
			}
			m, err := dlq.Next(jetstream.FetchMaxWait(5 * time.Second))
			if err != nil {
				t.Fatalf("dead letter: %v", err)
			}
			if got := m.Headers().Get(bus.HeaderDLQCode); got != strconv.Itoa(int(tc.code)) {
				t.Errorf("dead letter code %q, want %d", got, tc.code)
			}
			if fake.TranscriptionCount() != 0 {
				t.Error("a malformed job reached the backend")
			}
		})
	}
	t.Run("no conversation in the subject", func(t *testing.T) {
		h := newHarness(t)
		h.replica(h.config(fakeopenai.New(t)))
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if _, err := h.js.Publish(ctx, "alicia.asr.jobs.x.y", []byte("junk")); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 5*time.Second, func() bool { return h.queued() == 0 }, "job settled")
	})
}
