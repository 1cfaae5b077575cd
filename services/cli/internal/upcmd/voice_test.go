package upcmd_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/cli/internal/upcmd"
	"github.com/alicia-voice/alicia/services/tts"
)

// line returns the banner line that starts with label.
func line(out, label string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), label) {
			return l
		}
	}
	return ""
}

// checkVoice: up runs the voice services. Their consumers exist (the
// room-agent's on AGENT_DISPATCH has taken the dispatch the gateway's token
// endpoint queued), the banner names the speech engine and the ASR backend
// (unreachable here, and said so), a final ASR job gets ErrorMessage 503
// from the asr, and a voice answer to the user message am_up of ac_up is
// spoken by espeak-ng.
func checkVoice(t *testing.T, out string, nc *nats.Conn, js jetstream.JetStream, asrURL string) {
	t.Helper()
	// A CGO_ENABLED=0 build has no room-agent, and says so.
	agent := !strings.Contains(line(out, "Room agent:"), "not in this build")
	if l := line(out, "Services:"); !strings.Contains(l, "asr") || !strings.Contains(l, "tts") || strings.Contains(l, "room-agent") != agent {
		t.Errorf("Services line %q: want asr, tts and (in a cgo build) room-agent", l)
	}
	if l := line(out, "ASR:"); !strings.Contains(l, asrURL+" (whisper-large-v3) UNREACHABLE") || !strings.Contains(l, "ErrorMessage 503") {
		t.Errorf("ASR line %q: want %s reported unreachable", l, asrURL)
	}
	if l := line(out, "TTS:"); !strings.Contains(l, "espeak-ng (voice en-us) reachable (local;") || !strings.Contains(l, "ALICIA_TTS_URL") {
		t.Errorf("TTS line %q: want espeak-ng, reachable, without ALICIA_TTS_URL", l)
	}
	ctx := context.Background()
	for _, c := range []struct{ stream, consumer string }{
		{bus.StreamDispatch, "room-agent"}, {bus.StreamASRJobs, "asr"}, {bus.StreamConversations, "tts"},
	} {
		if c.consumer == "room-agent" && !agent {
			continue
		}
		testkit.EventuallyNoError(t, 20*time.Second, func() error {
			_, err := js.Consumer(ctx, c.stream, c.consumer)
			return err
		}, "consumer "+c.consumer+" on "+c.stream)
	}
	testkit.EventuallyNoError(t, 20*time.Second, func() error {
		if !agent {
			return nil
		}
		cons, err := js.Consumer(ctx, bus.StreamDispatch, "room-agent")
		if err != nil {
			return err
		}
		info, err := cons.Info(ctx)
		if err != nil {
			return err
		}
		if info.Delivered.Consumer == 0 {
			return errNotYet("no dispatch delivered to the room-agent")
		}
		return nil
	}, "the room-agent did not take the dispatch")

	t.Run("asr reports its unreachable backend", func(t *testing.T) {
		const cid = "ac_upasr"
		errs := make(chan *protocol.ErrorMessage, 4)
		sub, err := nc.Subscribe(subjects.Server(cid, protocol.TypeErrorMessage), func(m *nats.Msg) {
			if env, err := protocol.Decode(m.Data); err == nil {
				if e, ok := env.Body.(*protocol.ErrorMessage); ok {
					errs <- e
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		pcm := tone(time.Second)
		job := &protocol.ASRJob{ID: protocol.NewID("aj"), UtteranceID: "am_upasr", ConversationID: cid, Sequence: 1, Final: true,
			Format: audio.PCMFormat(16000), Data: audio.Bytes(pcm), DurationMs: 1000, CreatedAt: time.Now().UnixMilli(),
			SpeechEndMs: protocol.Ptr(time.Now().UnixMilli())}
		data, err := protocol.Encode(protocol.New(cid, job))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(ctx, subjects.ASRJob(cid), data); err != nil {
			t.Fatal(err)
		}
		select {
		case e := <-errs:
			if e.Code != protocol.CodeBackendUnavailable {
				t.Fatalf("ErrorMessage %+v, want code %d", e, protocol.CodeBackendUnavailable)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("no ErrorMessage for a final job while the ASR backend is down")
		}
	})

	t.Run("tts speaks with espeak-ng", func(t *testing.T) {
		// A voice answer to the user message the test sent (am_up).
		checkSpeaks(t, nc, js, "ac_up", "am_up", "am_uptts")
	})
}

// checkSpeaks: a voice answer (turn) to the user message previous of
// conversation cid is spoken: a complete sentence of audible speech at
// 24 kHz reaches the room-agent's subject.
func checkSpeaks(t *testing.T, nc *nats.Conn, js jetstream.JetStream, cid, previous, turn string) {
	t.Helper()
	ctx := context.Background()
	frames := make(chan *protocol.SpeechAudio, 256)
	sub, err := nc.Subscribe(subjects.AudioOut(cid), func(m *nats.Msg) {
		if env, err := protocol.Decode(m.Data); err == nil {
			if sa, ok := env.Body.(*protocol.SpeechAudio); ok {
				frames <- sa
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	pub := bus.NewPublisher(js)
	for _, body := range []protocol.Body{
		&protocol.StartAnswer{ID: turn, PreviousID: previous, ConversationID: cid, AnswerType: protocol.Ptr(protocol.StartAnswerAnswerTypeVoice)},
		&protocol.AssistantSentence{ID: protocol.Ptr("ams" + strings.TrimPrefix(turn, "am") + "_1"), PreviousID: turn, ConversationID: cid, Sequence: 1,
			Text: "Hello from the stack.", IsFinal: protocol.Ptr(true)},
	} {
		if _, err := pub.PublishServer(ctx, protocol.New(cid, body), ""); err != nil {
			t.Fatal(err)
		}
	}
	var pcm []int16
	deadline := time.After(20 * time.Second)
	for {
		select {
		case sa := <-frames:
			if sa.MessageID != turn || sa.Format != audio.PCMFormat(24000) {
				t.Fatalf("speech audio %s %s, want turn %s at 24 kHz", sa.MessageID, sa.Format, turn)
			}
			pcm = append(pcm, audio.Samples(sa.Data)...)
			if !sa.Last {
				continue
			}
			if d := audio.FramesDuration(len(pcm), 24000); d < 500*time.Millisecond || audio.DBFS(pcm) < -40 {
				t.Fatalf("spoke %v at %.1f dBFS: want audible speech", d, audio.DBFS(pcm))
			}
			return
		case <-deadline:
			t.Fatalf("no complete sentence of speech (%d samples)", len(pcm))
		}
	}
}

type errNotYet string

func (e errNotYet) Error() string { return string(e) }

// tone is a 440 Hz tone at 16 kHz: audio the asr uploads as it would speech.
func tone(d time.Duration) []int16 {
	n := int(d.Seconds() * 16000)
	s := make([]int16, n)
	for i := range s {
		s[i] = int16(8000 * math.Sin(2*math.Pi*440*float64(i)/16000))
	}
	return s
}

func TestTTSConfigFrom(t *testing.T) {
	for _, tt := range []struct {
		name        string
		env         map[string]string
		engine, url string
	}{
		{name: "no URL: espeak-ng", engine: tts.EngineEspeak},
		{name: "URL: the OpenAI-compatible server", env: map[string]string{"ALICIA_TTS_URL": "http://speaches:8000/v1"},
			engine: tts.EngineOpenAI, url: "http://speaches:8000/v1"},
		{name: "engine chosen without URL", env: map[string]string{"ALICIA_TTS_ENGINE": "openai"}, engine: tts.EngineOpenAI, url: "http://127.0.0.1:8000"},
		{name: "espeak chosen with URL", env: map[string]string{"ALICIA_TTS_ENGINE": "espeak", "ALICIA_TTS_URL": "http://speaches:8000"},
			engine: tts.EngineEspeak, url: "http://speaches:8000"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"ALICIA_TTS_ENGINE", "ALICIA_TTS_URL", "ALICIA_TTS_VOICE", "ALICIA_TTS_MODEL"} {
				t.Setenv(k, tt.env[k])
			}
			c, err := upcmd.TTSConfigFrom(config.Environ())
			if err != nil {
				t.Fatal(err)
			}
			if c.Engine != tt.engine || (tt.url != "" && c.URL != tt.url) {
				t.Fatalf("engine %q URL %q, want %q %q", c.Engine, c.URL, tt.engine, tt.url)
			}
		})
	}
	t.Run("an unknown engine is refused", func(t *testing.T) {
		t.Setenv("ALICIA_TTS_ENGINE", "piper")
		t.Setenv("ALICIA_TTS_URL", "")
		if _, err := upcmd.TTSConfigFrom(config.Environ()); err == nil || !strings.Contains(err.Error(), "ALICIA_TTS_ENGINE") {
			t.Fatalf("err = %v, want one naming ALICIA_TTS_ENGINE", err)
		}
	})
}
