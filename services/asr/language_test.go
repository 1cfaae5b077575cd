package asr_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
)

// TestConversationLanguage: the transcription request's language is the
// conversation's (alicia_conversations.preferences.preferredLanguage, a
// BCP 47 tag sent as its Whisper code), else its owner's
// (alicia_user_settings), else the job's hint (the installation's);
// a Configuration published between two utterances applies from the next
// one, before persistence stored it (none runs here).
func TestConversationLanguage(t *testing.T) {
	url := pgtest.NewURL(t)
	db, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, sql := range []string{
		`INSERT INTO alicia_conversations (id, user_id, preferences) VALUES
			('ac_pt', 'ana', '{"preferredLanguage":"pt-BR"}'), ('ac_ana', 'ana', '{}'), ('ac_bob', 'bob', '{}')`,
		`INSERT INTO alicia_user_settings (user_id, language, set_at) VALUES ('ana', 'fr', now())`,
	} {
		if _, err := db.Exec(context.Background(), sql); err != nil {
			t.Fatal(err)
		}
	}
	h := newHarness(t)
	fake := fakeopenai.New(t)
	cfg := h.config(fake)
	cfg.PostgresURL = url
	h.replica(cfg)

	languageOf := func(cid string) string {
		t.Helper()
		before := fake.TranscriptionCount()
		// The job's hint is "en", as the room-agent's ALICIA_ASR_LANGUAGE.
		h.publish(newUtterance(cid).job(true, 800*time.Millisecond))
		testkit.Eventually(t, 10*time.Second, func() bool { return fake.TranscriptionCount() > before }, "transcription of %s", cid)
		reqs := fake.TranscriptionRequests()
		return reqs[len(reqs)-1].Language
	}
	for cid, want := range map[string]string{"ac_pt": "pt", "ac_ana": "fr", "ac_bob": "en"} {
		if got := languageOf(cid); got != want {
			t.Errorf("%s: language %q, want %q", cid, got, want)
		}
	}

	conf := protocol.New("ac_bob", &protocol.Configuration{ConversationID: protocol.Ptr("ac_bob"), PreferredLanguage: protocol.Ptr("de-AT")})
	conf.Meta = map[string]any{edge.MetaUserID: "bob"}
	if _, err := bus.NewPublisher(h.js).PublishClient(context.Background(), conf); err != nil {
		t.Fatal(err)
	}
	if got := languageOf("ac_bob"); got != "de" {
		t.Errorf("after the Configuration: language %q, want de", got)
	}
}
