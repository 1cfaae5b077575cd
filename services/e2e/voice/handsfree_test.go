package voice_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/pkg/testkit/voiceclient"
)

// Hands-free mode (issue 30, item 3) with the real stack: alice's
// UserSettings turn it on, so her conversation answers only speech that
// begins with "Alicia". An utterance not addressed to Alicia leaves
// nothing: no Transcription or UserMessage to the client (only the data
// channel's notice, without its words, that it was not taken), no message,
// audio or any other row in Postgres, nothing on CONVERSATIONS that names
// it. The next one, "Alicia, …", is answered, its user message without the
// wake word, with its audio row.
func TestHandsFree(t *testing.T) {
	s := newStack(t, options{})
	const (
		aside    = "So I told him the weather would be fine tomorrow."
		question = "Alicia, what is the weather like in Paris tomorrow?"
		request  = "What is the weather like in Paris tomorrow?"
	)
	var mu sync.Mutex
	saying := aside
	s.speech.SetTranscriber(func(fakeopenai.TranscriptionRequest) fakeopenai.Transcript {
		mu.Lock()
		defer mu.Unlock()
		return fakeopenai.Transcript{Text: saying}
	})
	ctx := context.Background()

	// alice's default: hands-free (alicia_user_settings.wake_word).
	settings := protocol.New("", &protocol.UserSettings{UserID: "alice", WakeWord: protocol.Ptr(true), Timestamp: time.Now().UnixMilli()})
	settings.Meta = map[string]any{edge.MetaUserID: "alice"}
	if _, err := s.pub.PublishSystem(ctx, settings, ""); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyNoError(t, 20*time.Second, func() error {
		var on bool
		return s.pool.QueryRow(ctx, `SELECT wake_word FROM alicia_user_settings WHERE user_id = 'alice' AND wake_word`).Scan(&on)
	}, "alice's settings not stored")

	cid := s.conversation()
	// What the asr tells the room-agent on core NATS.
	core := make(chan *protocol.Transcription, 64)
	sub, err := s.nc.Subscribe(subjects.SpecTranscript(cid), func(m *nats.Msg) {
		if env, err := protocol.Decode(m.Data); err == nil {
			if tr, ok := env.Body.(*protocol.Transcription); ok {
				core <- tr
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })

	u := voiceclient.Join(t, s.lk.URL, s.token(cid), true)
	u.Configure(voiceConfig(cid), cid)

	// Not addressed: the asr's final verdict comes on core NATS only.
	u.Say(voiceclient.Speech(t, aside))
	var asideID string
	deadline := time.After(30 * time.Second)
	for asideID == "" {
		select {
		case tr := <-core:
			if tr.Final {
				if tr.Addressed == nil || *tr.Addressed || tr.Text != aside {
					t.Fatalf("final transcript of the aside %+v", tr)
				}
				asideID = tr.ID
			} else if tr.Addressed == nil || *tr.Addressed {
				t.Fatalf("partial transcript of the aside %+v", tr)
			}
		case <-deadline:
			t.Fatal("no unaddressed final transcript on core NATS")
		}
	}

	// Addressed: answered.
	mu.Lock()
	saying = question
	mu.Unlock()
	u.Say(voiceclient.Speech(t, question))
	final := u.WaitFor(30*time.Second, "no final transcription of the question", func(e protocol.Envelope) bool {
		tr, ok := e.Body.(*protocol.Transcription)
		return ok && tr.Final && tr.ID != asideID
	}).Body.(*protocol.Transcription)
	if final.Text != question || final.Addressed == nil || !*final.Addressed || final.ID == asideID {
		t.Fatalf("final transcription %+v", final)
	}
	sa := u.WaitFor(30*time.Second, "no StartAnswer", isType(protocol.TypeStartAnswer)).Body.(*protocol.StartAnswer)
	if sa.PreviousID != final.ID {
		t.Fatalf("StartAnswer answers %q, want %q", sa.PreviousID, final.ID)
	}
	testkit.EventuallyNoError(t, 30*time.Second, func() error {
		var content, trans string
		if err := s.pool.QueryRow(ctx, `SELECT m.contents, a.transcription FROM alicia_messages m JOIN alicia_audio a ON a.id = m.audio_id
			WHERE m.id = $1 AND m.message_role = 'user'`, final.ID).Scan(&content, &trans); err != nil {
			return err
		}
		if content != request {
			return errorf("user message %q, want %q", content, request)
		}
		return nil
	}, "the addressed utterance's rows")
	testkit.EventuallyNoError(t, 30*time.Second, func() error {
		var n int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM alicia_messages WHERE id = $1`, sa.ID).Scan(&n); err != nil || n != 1 {
			return errorf("answer rows %d (%v)", n, err)
		}
		return nil
	}, "the answer's row")

	// Persistence applies the stream in order: the question's rows are
	// there, so anything of the aside would be too. The person was told on
	// the data channel, without the words, that the aside was not taken.
	told := false
	for _, e := range u.Received() {
		switch b := e.Body.(type) {
		case *protocol.Transcription:
			if b.ID == asideID && b.Final && b.Addressed != nil && !*b.Addressed && b.Text == "" && e.StanzaID == 0 {
				told = true
			} else if b.ID == asideID || b.Addressed == nil || !*b.Addressed {
				t.Errorf("the client got a transcription of the aside: %+v", b)
			}
		case *protocol.UserMessage:
			if b.ID == asideID {
				t.Errorf("the client got the aside as a user message")
			}
		}
	}
	if !told {
		t.Error("the data channel did not say the aside was not addressed")
	}
	var msgs, audio, users int
	if err := s.pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM alicia_messages WHERE conversation_id = $1 AND (id = $2 OR contents ILIKE '%told him%')),
			(SELECT count(*) FROM alicia_audio WHERE conversation_id = $1),
			(SELECT count(*) FROM alicia_messages WHERE conversation_id = $1 AND message_role = 'user')`, cid, asideID).
		Scan(&msgs, &audio, &users); err != nil {
		t.Fatal(err)
	}
	if msgs != 0 || audio != 1 || users != 1 {
		t.Errorf("rows: %d of the aside, %d audio (want the question's only), %d user messages (want 1)", msgs, audio, users)
	}
	for _, e := range natstest.Stored(t, s.js, bus.StreamConversations, subjects.Conversation(cid)) {
		raw, _ := protocol.Encode(e)
		if strings.Contains(string(raw), asideID) || strings.Contains(string(raw), "told him") {
			t.Errorf("CONVERSATIONS holds %s naming the aside: %s", e.Type, raw)
		}
	}
}
