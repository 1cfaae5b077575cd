package voice_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/voiceclient"
)

func voiceConfig(cid string) *protocol.Configuration {
	return &protocol.Configuration{ConversationID: &cid, Features: []protocol.ConfigurationFeaturesElem{
		protocol.ConfigurationFeaturesElemStreaming, protocol.ConfigurationFeaturesElemAudioOutput, protocol.ConfigurationFeaturesElemPartialResponses}}
}

func isType(t protocol.MessageType) func(protocol.Envelope) bool {
	return func(e protocol.Envelope) bool { return e.Type == t }
}

func TestVoiceTurn(t *testing.T) {
	s := newStack(t, options{})
	s.speech.SetTranscriber(func(r fakeopenai.TranscriptionRequest) fakeopenai.Transcript {
		if r.Duration < 1200*time.Millisecond {
			return fakeopenai.Transcript{Text: "What is the weather"}
		}
		return fakeopenai.Transcript{Text: "What is the weather like in Paris tomorrow?"}
	})
	cid := s.conversation()
	u := voiceclient.Join(t, s.lk.URL, s.token(cid), true)
	u.Configure(voiceConfig(cid), cid)

	spoken := u.Say(voiceclient.Speech(t, "What is the weather like in Paris tomorrow?"))
	saidAt := time.Now()

	final := u.WaitFor(20*time.Second, "no final transcription", func(e protocol.Envelope) bool {
		tr, ok := e.Body.(*protocol.Transcription)
		return ok && tr.Final
	}).Body.(*protocol.Transcription)
	if final.Text != "What is the weather like in Paris tomorrow?" {
		t.Fatalf("final transcription %q", final.Text)
	}
	var partials int
	for _, e := range u.Received() {
		if tr, ok := e.Body.(*protocol.Transcription); ok && !tr.Final {
			partials++
			if tr.ID != final.ID {
				t.Fatalf("partial of another utterance: %+v", tr)
			}
		}
	}
	if partials == 0 {
		t.Fatalf("no partial transcription while %v of speech went on", spoken)
	}
	sa := u.WaitFor(20*time.Second, "no StartAnswer", isType(protocol.TypeStartAnswer)).Body.(*protocol.StartAnswer)
	if sa.PreviousID != final.ID {
		t.Fatalf("StartAnswer answers %q, want the transcription %q", sa.PreviousID, final.ID)
	}
	u.WaitFor(20*time.Second, "no final sentence", func(e protocol.Envelope) bool {
		b, ok := e.Body.(*protocol.AssistantSentence)
		return ok && b.IsFinal != nil && *b.IsFinal
	})
	// The agent's voice reaches the user: several seconds of non-silent audio.
	testkit.Eventually(t, 20*time.Second, func() bool {
		n, _, _ := voiceclient.Loud(u.Heard(), saidAt)
		return n >= 50 // a second of audio
	}, fmt.Sprintf("no agent speech heard (speech requests %d, heard %d pieces)", s.speech.SpeechCount(), len(u.Heard())))

	// The agent told the user, on the data channel, as each sentence started
	// and ended: playing, then played, for the three sentences in order.
	testkit.EventuallyNoError(t, 20*time.Second, func() error {
		var marks []string
		for _, e := range u.Received() {
			if p, ok := e.Body.(*protocol.SentencePlayout); ok && p.MessageID == sa.ID {
				marks = append(marks, fmt.Sprintf("%d:%s", p.Sequence, p.Status))
			}
		}
		want := "[1:playing 1:played 2:playing 2:played 3:playing 3:played]"
		if got := fmt.Sprint(marks); got != want {
			return errorf("playout marks %s, want %s", got, want)
		}
		return nil
	}, "playout marks")

	// Rows: the user's message from the transcription with its audio row, the
	// answer with its sentences and their audio fields, played.
	ctx := context.Background()
	testkit.EventuallyNoError(t, 20*time.Second, func() error {
		var content, audioID, trans, kind, format string
		var track *string
		var dur int32
		if err := s.pool.QueryRow(ctx, `SELECT m.contents, m.audio_id, a.transcription, a.duration_ms, a.audio_type::text, a.audio_format, a.livekit_track_sid
			FROM alicia_messages m JOIN alicia_audio a ON a.id = m.audio_id WHERE m.id = $1 AND m.message_role = 'user'`, final.ID).
			Scan(&content, &audioID, &trans, &dur, &kind, &format, &track); err != nil {
			return err
		}
		if content != final.Text || trans != final.Text || dur < 1000 || kind != "input" || format != "pcm_s16le_16000" || track == nil || *track == "" {
			return errorf("user row %q / audio %q, %d ms, %s, %s, track %v", content, trans, dur, kind, format, track)
		}
		var n, played, withAudio int
		if err := s.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE playout_status = 'played'),
				count(*) FILTER (WHERE audio_format = 'pcm_s16le_24000' AND duration_ms > 0 AND audio_bytesize > 0)
			FROM alicia_sentences WHERE message_id = $1`, sa.ID).Scan(&n, &played, &withAudio); err != nil {
			return err
		}
		if n != 3 || played != 3 || withAudio != 3 {
			return errorf("sentences %d, played %d, with audio %d; want 3 each", n, played, withAudio)
		}
		return nil
	}, "rows do not match")

	// The call ends when the person leaves: the agent leaves the empty room
	// and the session's SessionStats is stored (the question and its
	// answer, how long it lasted).
	u.Room.Disconnect()
	testkit.EventuallyNoError(t, 30*time.Second, func() error {
		var msgs, tools int
		var dur int64
		var began, ended time.Time
		if err := s.pool.QueryRow(ctx, `SELECT message_count, tool_call_count, session_duration_ms, session_started_at, last_activity_at
			FROM alicia_session_stats WHERE conversation_id = $1`, cid).Scan(&msgs, &tools, &dur, &began, &ended); err != nil {
			return err
		}
		if msgs != 2 || tools != 0 || !began.Before(saidAt) || !ended.After(saidAt) || dur != ended.Sub(began).Milliseconds() {
			return errorf("session stats: %d messages, %d tool calls, %d ms from %v to %v (spoken at %v)", msgs, tools, dur, began, ended, saidAt)
		}
		return nil
	}, "no SessionStats after the call")
}
