package prefs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/prefs"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
)

var defaults = prefs.Defaults{Voice: "af_sarah", Language: "", TimeZone: "Europe/Paris"}

func seed(t *testing.T, pool *pgxpool.Pool, cid, user, prefsJSON string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(),
		`INSERT INTO alicia_conversations (id, user_id, preferences) VALUES ($1, $2, $3::jsonb)`, cid, user, prefsJSON); err != nil {
		t.Fatal(err)
	}
}

func person(t *testing.T, pool *pgxpool.Pool, user, voice string, speed float64, lang string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(),
		`INSERT INTO alicia_user_settings (user_id, voice, speech_speed, language, set_at) VALUES ($1, $2, $3, $4, now())`,
		user, voice, speed, lang); err != nil {
		t.Fatal(err)
	}
}

func TestResolveLayers(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	seed(t, pool, "ac_own", "ana", `{"voice":"bf_emma","speechSpeed":1.5,"preferredLanguage":"pt-BR","wakeWord":true,"device":"web"}`)
	seed(t, pool, "ac_none", "ana", `{"device":"web"}`)
	seed(t, pool, "ac_bad", "bob", `{"voice":3,"speechSpeed":"fast"}`)
	person(t, pool, "ana", "am_adam", 0.8, "fr")

	cases := []struct {
		name, cid string
		want      prefs.Effective
	}{
		{"the conversation's own over the person's", "ac_own", prefs.Effective{UserID: "ana",
			Voice: "bf_emma", VoiceFrom: prefs.FromConversation, SpeechSpeed: 1.5, SpeechSpeedFrom: prefs.FromConversation,
			Language: "pt-BR", LanguageFrom: prefs.FromConversation, WakeWord: true, WakeWordFrom: prefs.FromConversation,
			TimeZone: "Europe/Paris", TimeZoneFrom: prefs.FromInstallation}},
		{"the person's when the conversation sets none", "ac_none", prefs.Effective{UserID: "ana",
			Voice: "am_adam", VoiceFrom: prefs.FromPerson, SpeechSpeed: 0.8, SpeechSpeedFrom: prefs.FromPerson,
			Language: "fr", LanguageFrom: prefs.FromPerson, WakeWordFrom: prefs.FromInstallation,
			TimeZone: "Europe/Paris", TimeZoneFrom: prefs.FromInstallation}},
		{"values of the wrong type ignored, the installation's", "ac_bad", prefs.Effective{UserID: "bob",
			Voice: "af_sarah", VoiceFrom: prefs.FromInstallation, SpeechSpeed: 1, SpeechSpeedFrom: prefs.FromInstallation,
			LanguageFrom: prefs.FromInstallation, WakeWordFrom: prefs.FromInstallation,
			TimeZone: "Europe/Paris", TimeZoneFrom: prefs.FromInstallation}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := prefs.Resolve(ctx, pool, c.cid, defaults)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("got %+v\nwant %+v", got, c.want)
			}
		})
	}
	t.Run("an unknown conversation gets the installation's", func(t *testing.T) {
		got, err := prefs.Resolve(ctx, pool, "ac_nobody", defaults)
		if !errors.Is(err, prefs.ErrNoConversation) || got.Voice != "af_sarah" || got.SpeechSpeed != 1 {
			t.Fatalf("got %+v, %v", got, err)
		}
	})
}

// TestCacheFollowsEnvelopes: a Configuration and a UserSettings published
// on the bus apply at the next Get, before (here: without) persistence
// storing them, and a UserSettings set by someone else is ignored.
func TestCacheFollowsEnvelopes(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	seed(t, pool, "ac_live", "ana", `{}`)
	seed(t, pool, "ac_other", "ana", `{"voice":"bf_emma"}`)
	nc := natstest.Connect(t, natstest.Run(t))
	c := prefs.NewCache(pool, defaults)
	rt := bus.NewRoutes("test", zerolog.Nop())
	c.Route(rt)
	subs, err := rt.Subscribe(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	defer subs.Close()

	get := func(cid string) prefs.Effective {
		t.Helper()
		e, err := c.Get(ctx, cid)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	if e := get("ac_live"); e.Voice != "af_sarah" || e.VoiceFrom != prefs.FromInstallation {
		t.Fatalf("before: %+v", e)
	}
	publish := func(cid string, env protocol.Envelope) {
		t.Helper()
		data, err := protocol.Encode(env)
		if err != nil {
			t.Fatal(err)
		}
		subject := subjects.System(env.Type)
		if cid != "" {
			subject = subjects.Client(cid, env.Type)
		}
		if err := nc.Publish(subject, data); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		testkit.Eventually(t, 5*time.Second, ok, what)
	}

	us := protocol.New("", &protocol.UserSettings{UserID: "ana", Voice: protocol.Ptr("am_adam"), SpeechSpeed: protocol.Ptr(1.25), Timestamp: time.Now().UnixMilli()})
	us.Meta = map[string]any{"alicia.user_id": "ana"}
	publish("", us)
	waitFor("the person's voice", func() bool { return get("ac_live").Voice == "am_adam" })
	if e := get("ac_live"); e.SpeechSpeed != 1.25 || e.SpeechSpeedFrom != prefs.FromPerson {
		t.Fatalf("person: %+v", e)
	}
	if e := get("ac_other"); e.Voice != "bf_emma" || e.SpeechSpeed != 1.25 {
		t.Fatalf("the other conversation keeps its own voice, takes the person's speed: %+v", e)
	}

	// A UserSettings set by someone else is ignored: had the forged one
	// (the newest) been applied, the genuine one after it, older, would not.
	now := time.Now().UnixMilli()
	forged := protocol.New("", &protocol.UserSettings{UserID: "ana", Voice: protocol.Ptr("forged"), Timestamp: now + 60000})
	forged.Meta = map[string]any{"alicia.user_id": "mallory"}
	publish("", forged)
	genuine := protocol.New("", &protocol.UserSettings{UserID: "ana", Voice: protocol.Ptr("am_eric"), SpeechSpeed: protocol.Ptr(1.25), Timestamp: now + 1})
	genuine.Meta = map[string]any{"alicia.user_id": "ana"}
	publish("", genuine)
	waitFor("the genuine settings", func() bool { return get("ac_live").Voice == "am_eric" })
	publish("ac_live", protocol.New("ac_live", &protocol.Configuration{ConversationID: protocol.Ptr("ac_live"), PreferredLanguage: protocol.Ptr("de")}))
	waitFor("the conversation's language", func() bool { return get("ac_live").Language == "de" })
	publish("ac_live", protocol.New("ac_live", &protocol.Configuration{ConversationID: protocol.Ptr("ac_live"), Voice: protocol.Ptr("bm_george")}))
	waitFor("the conversation's voice", func() bool { return get("ac_live").Voice == "bm_george" })
	if e := get("ac_live"); e.Language != "de" || e.LanguageFrom != prefs.FromConversation || e.SpeechSpeed != 1.25 {
		t.Fatalf("Configurations add up, over the person's: %+v", e)
	}
	if e := get("ac_other"); e.Voice != "bf_emma" || e.Language != "" {
		t.Fatalf("another conversation of the person keeps its own: %+v", e)
	}
}

func TestBaseLanguage(t *testing.T) {
	for in, want := range map[string]string{"pt-BR": "pt", "EN": "en", "zh_Hant": "zh", "": "", "yue-HK": "yue"} {
		if got := prefs.BaseLanguage(in); got != want {
			t.Errorf("BaseLanguage(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCacheWithoutPostgres: with nothing stored to read, a conversation's
// Configuration heard names its person (meta alicia.user_id), whose
// UserSettings then apply under the conversation's own values.
func TestCacheWithoutPostgres(t *testing.T) {
	c := prefs.NewCache(nil, defaults)
	ctx := context.Background()
	c.HeardPerson(&protocol.UserSettings{UserID: "ana", Voice: protocol.Ptr("am_adam"), Language: protocol.Ptr("fr"), Timestamp: 1})
	if e, err := c.Get(ctx, "ac_x"); err != nil || e.Voice != "af_sarah" || e.Language != "" {
		t.Fatalf("nothing heard of the conversation: %+v, %v", e, err)
	}
	c.Heard("ac_x", "ana", prefs.Layer{SpeechSpeed: protocol.Ptr(1.5)})
	e, err := c.Get(ctx, "ac_x")
	if err != nil || e.UserID != "ana" || e.Voice != "am_adam" || e.VoiceFrom != prefs.FromPerson || e.Language != "fr" ||
		e.SpeechSpeed != 1.5 || e.SpeechSpeedFrom != prefs.FromConversation {
		t.Fatalf("after its Configuration: %+v, %v", e, err)
	}
}

// BenchmarkResolve is one read (a cache miss); BenchmarkCacheGet a hit.
func BenchmarkResolve(b *testing.B) {
	pool := pgtest.New(b)
	if _, err := pool.Exec(context.Background(), `INSERT INTO alicia_conversations (id, user_id, preferences) VALUES ('ac_b', 'ana', '{"voice":"bf_emma"}')`); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("read", func(b *testing.B) {
		for b.Loop() {
			if _, err := prefs.Resolve(ctx, pool, "ac_b", defaults); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		c := prefs.NewCache(pool, defaults)
		for b.Loop() {
			if _, err := c.Get(ctx, "ac_b"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
