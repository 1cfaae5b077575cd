package tts_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
	"github.com/alicia-voice/alicia/services/tts"
)

// TestConversationVoice: each answer is spoken with its conversation's
// voice and speed (alicia_conversations.preferences), else its owner's
// (alicia_user_settings), else the installation's; a Configuration
// published during an answer applies from its next sentence, before
// persistence stored it (none runs here); a voice the backend does not
// have is spoken with the installation's, the answer not failed.
func TestConversationVoice(t *testing.T) {
	url := pgtest.NewURL(t)
	db, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Exec(context.Background(), sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec(`INSERT INTO alicia_conversations (id, user_id, preferences) VALUES
		('ac_own', 'ana', '{"voice":"bf_emma","speechSpeed":1.5}'),
		('ac_person', 'ana', '{}'),
		('ac_install', 'bob', '{}'),
		('ac_unknown', 'bob', '{"voice":"no_such_voice"}')`)
	exec(`INSERT INTO alicia_user_settings (user_id, voice, speech_speed, set_at) VALUES ('ana', 'am_adam', 0.8, now())`)
	h := newHarness(t, func(c *tts.Config) { c.PostgresURL = url })
	h.fake.SetSpeech(fakeopenai.SpeechConfig{RejectUnknownVoices: true})

	type heard struct {
		voice string
		speed float64
	}
	requestsFor := func(text string) []heard {
		var out []heard
		for _, r := range h.fake.SpeechRequests() {
			if r.Input == text {
				out = append(out, heard{r.Voice, r.Speed})
			}
		}
		return out
	}
	cases := []struct {
		cid, turn string
		want      []heard
	}{
		{"ac_own", "am_own", []heard{{"bf_emma", 1.5}}},
		{"ac_person", "am_person", []heard{{"am_adam", 0.8}}},
		{"ac_install", "am_install", []heard{{"af_sarah", 0}}},
		// Refused, then spoken with the installation's voice.
		{"ac_unknown", "am_unknown", []heard{{"no_such_voice", 0}, {"af_sarah", 0}}},
	}
	for _, c := range cases {
		t.Run(c.cid, func(t *testing.T) {
			text := "Spoken in " + c.cid + "."
			h.speak(c.cid, c.turn, text)
			h.waitSpoken(c.turn, 10*time.Second)
			if got := requestsFor(text); len(got) != len(c.want) || got[0] != c.want[0] || got[len(got)-1] != c.want[len(c.want)-1] {
				t.Fatalf("requests %+v, want %+v", got, c.want)
			}
		})
	}
	if errs := h.errors(); len(errs) != 0 {
		t.Fatalf("an unknown voice failed a sentence: %+v", errs[0])
	}

	t.Run("a change applies from the next sentence", func(t *testing.T) {
		ctx := context.Background()
		h.startAnswer("ac_person", "am_change", protocol.Ptr(protocol.StartAnswerAnswerTypeVoice))
		h.sentence(ctx, "ac_person", "am_change", 1, "Before the change.", false)
		testkit.Eventually(t, 10*time.Second, func() bool { return len(requestsFor("Before the change.")) == 1 }, "first sentence synthesised")
		conf := protocol.New("ac_person", &protocol.Configuration{ConversationID: protocol.Ptr("ac_person"),
			Voice: protocol.Ptr("bm_george"), SpeechSpeed: protocol.Ptr(1.25)})
		if _, err := h.pub.PublishClient(ctx, conf); err != nil {
			t.Fatal(err)
		}
		h.sentence(ctx, "ac_person", "am_change", 2, "After the change.", true)
		h.waitSpoken("am_change", 10*time.Second)
		if got := requestsFor("Before the change."); got[0] != (heard{"am_adam", 0.8}) {
			t.Fatalf("before: %+v", got)
		}
		if got := requestsFor("After the change."); len(got) != 1 || got[0] != (heard{"bm_george", 1.25}) {
			t.Fatalf("after: %+v", got)
		}
	})
}
