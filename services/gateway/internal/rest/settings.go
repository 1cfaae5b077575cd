package rest

import (
	"context"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/text/language"

	"github.com/alicia-voice/alicia/pkg/prefs"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/restapi"
	"github.com/alicia-voice/alicia/services/gateway/internal/auth"
	"github.com/alicia-voice/alicia/services/gateway/internal/voices"
)

// Voices and languages per person and per conversation (issue 30, item 2):
// a person's defaults are a UserSettings on alicia.sys.user_settings, a
// conversation's own values a Configuration on its client subject; both
// are read back from Postgres once persistence applied them, and the asr
// and tts apply them from the next utterance and sentence (pkg/prefs).

// Prefs is what the settings routes need besides the store.
type Prefs struct {
	// Defaults are the installation's (ALICIA_TTS_VOICE, ALICIA_TTS_SPEED,
	// ALICIA_ASR_LANGUAGE, ALICIA_TIME_ZONE).
	Defaults prefs.Defaults
	// Voices lists the speech engine's voices; nil: any voice is taken.
	Voices *voices.Catalog
}

func (a *API) getSettings(c echo.Context) error {
	l, err := a.Store.UserSettings(c.Request().Context(), auth.UserOf(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, restapi.UserSettings{Voice: l.Voice, SpeechSpeed: l.SpeechSpeed, Language: l.Language,
		TimeZone: l.TimeZone, WakeWord: l.WakeWord})
}

func (a *API) putSettings(c echo.Context) error {
	var in restapi.UserSettings
	if err := bindJSON(c, &in, true); err != nil {
		return err
	}
	ctx := c.Request().Context()
	if err := a.validVoice(ctx, in.Voice); err != nil {
		return err
	}
	if in.SpeechSpeed != nil && !validSpeed(*in.SpeechSpeed) {
		return fail(http.StatusBadRequest, "speechSpeed %v: use %v..%v (1 is the voice's own)", *in.SpeechSpeed, prefs.MinSpeed, prefs.MaxSpeed)
	}
	lang, err := validLanguage(in.Language)
	if err != nil {
		return err
	}
	if in.TimeZone != nil && *in.TimeZone != "" {
		if _, err := time.LoadLocation(*in.TimeZone); err != nil || *in.TimeZone == "Local" {
			return fail(http.StatusBadRequest, "timeZone %q is not an IANA time zone such as Europe/Paris", *in.TimeZone)
		}
	}
	user := auth.UserOf(c)
	body := &protocol.UserSettings{UserID: user, Voice: in.Voice, SpeechSpeed: in.SpeechSpeed, Language: lang,
		TimeZone: in.TimeZone, WakeWord: in.WakeWord, Timestamp: time.Now().UnixMilli()}
	if err := a.write(c, asSystemBy(body, user, nil, "")); err != nil {
		return err
	}
	return a.getSettings(c)
}

func (a *API) putConversationPreferences(c echo.Context) error {
	conv, err := a.conversation(c)
	if err != nil {
		return err
	}
	var in restapi.ConversationPreferences
	if err := bindJSON(c, &in, false); err != nil {
		return err
	}
	ctx := c.Request().Context()
	if in.Voice != nil && *in.Voice != "" {
		if err := a.validVoice(ctx, in.Voice); err != nil {
			return err
		}
	}
	if in.SpeechSpeed != nil && *in.SpeechSpeed != 0 && !validSpeed(*in.SpeechSpeed) {
		return fail(http.StatusBadRequest, "speechSpeed %v: use %v..%v, or 0 for your default", *in.SpeechSpeed, prefs.MinSpeed, prefs.MaxSpeed)
	}
	lang, err := validLanguage(in.Language)
	if err != nil {
		return err
	}
	if in.Voice == nil && in.SpeechSpeed == nil && in.Language == nil && in.WakeWord == nil {
		return fail(http.StatusBadRequest, "give at least one of voice, speechSpeed, language, wakeWord")
	}
	cid := conv.ID
	// The llm takes the client's features (streaming, audio output) from
	// the conversation's last Configuration: this one carries those the
	// client named, or a voice call's next answers would be text only.
	features, err := a.Store.ConversationFeatures(ctx, cid)
	if err != nil {
		return err
	}
	conf := &protocol.Configuration{ConversationID: &cid, Voice: in.Voice, SpeechSpeed: in.SpeechSpeed,
		PreferredLanguage: lang, WakeWord: in.WakeWord, Features: features}
	if err := a.write(c, asClient(auth.UserOf(c), protocol.New(cid, conf))); err != nil {
		return err
	}
	eff, err := a.effective(ctx, cid)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, eff)
}

// effective is what applies to conversation cid now.
func (a *API) effective(ctx context.Context, cid string) (restapi.EffectivePreferences, error) {
	e, err := a.Store.ConversationPreferences(ctx, cid, a.Prefs.Defaults)
	if err != nil {
		return restapi.EffectivePreferences{}, err
	}
	return restapi.EffectivePreferences{Voice: e.Voice, VoiceFrom: string(e.VoiceFrom), SpeechSpeed: e.SpeechSpeed,
		SpeechSpeedFrom: string(e.SpeechSpeedFrom), Language: e.Language, LanguageFrom: string(e.LanguageFrom),
		WakeWord: e.WakeWord, WakeWordFrom: string(e.WakeWordFrom), TimeZone: e.TimeZone}, nil
}

// validVoice checks a voice against the speech engine's (server-info's).
func (a *API) validVoice(ctx context.Context, v *string) error {
	if v == nil || *v == "" || a.Prefs.Voices == nil || a.Prefs.Voices.Has(ctx, *v) {
		return nil
	}
	ids := []string{}
	for _, vo := range a.Prefs.Voices.Voices(ctx) {
		ids = append(ids, vo.ID)
		if len(ids) == 8 {
			ids = append(ids, "…")
			break
		}
	}
	return fail(http.StatusBadRequest, "voice %q is not one of the speech engine's (GET /v1/server-info lists them: %s)", *v, strings.Join(ids, ", "))
}

func validSpeed(s float64) bool {
	return !math.IsNaN(s) && s >= prefs.MinSpeed && s <= prefs.MaxSpeed
}

// validLanguage checks a BCP 47 tag and returns it in its canonical form
// (en-us → en-US); an empty one is kept (it clears).
func validLanguage(l *string) (*string, error) {
	if l == nil || *l == "" {
		return l, nil
	}
	tag, err := language.Parse(*l)
	if err != nil || tag == language.Und {
		return nil, fail(http.StatusBadRequest, "language %q is not a BCP 47 tag such as en, fr or pt-BR", *l)
	}
	s := tag.String()
	return &s, nil
}
