package gateway_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/engines"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/restapi"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/gateway"
)

// TestVoicesAndLanguages (issue 30, item 2): server-info lists the speech
// engine's voices (speaches' voices endpoint, here the fake's) and the
// languages of both engines, over REST and in the WebSocket's ServerInfo;
// a person's settings are validated, stored through persistence (a
// UserSettings they set themselves) and read back; a conversation's own
// preferences are published as its Configuration and GET
// /v1/conversations/{id} shows what applies and where it came from.
func TestVoicesAndLanguages(t *testing.T) {
	speech := fakeopenai.New(t)
	s := newStack(t, func(o *stackOptions) {
		o.gateway = func(c *gateway.Config) {
			c.TTS = engines.Engine{URL: speech.URL(), Model: "kokoro", Voice: "af_sarah"}
			c.ASR = engines.Engine{URL: speech.URL(), Model: "Systran/faster-whisper-large-v3"}
			c.Prefs.Voice, c.Prefs.SpeechSpeed, c.Prefs.TimeZone = "af_sarah", 1, "UTC"
		}
	})

	var info restapi.ServerInfo
	s.call(t, aliceKey, "GET", "/v1/server-info", nil).want(http.StatusOK, &info)
	if len(info.Voices) != len(fakeopenai.DefaultVoices) || info.Voices[0].ID != "af_sarah" || info.Voices[4] != (restapi.SpeechVoice{ID: "ff_siwis", Name: "Siwis", Language: "fr-FR"}) {
		t.Fatalf("voices %+v", info.Voices)
	}
	if l := info.Models["tts"].Languages; !slices.Equal(l, []string{"en-GB", "en-US", "es-ES", "fr-FR"}) {
		t.Fatalf("tts languages %v", l)
	}
	if l := info.Models["asr"].Languages; !slices.Contains(l, "pt") || !slices.Contains(l, "en") || len(l) < 90 {
		t.Fatalf("asr languages %v", l)
	}
	alice := s.dial(t, aliceKey)
	if si, ok := alice.info.Body.(*protocol.ServerInfo); !ok || len(si.Voices) != len(fakeopenai.DefaultVoices) ||
		si.Voices[2].ID != "bf_emma" || si.Voices[2].Language == nil || *si.Voices[2].Language != "en-GB" || len(si.Models.TTS.Languages) != 4 {
		t.Fatalf("the WebSocket's ServerInfo %+v", alice.info.Body)
	}

	// A person's settings.
	var set restapi.UserSettings
	s.call(t, aliceKey, "GET", "/v1/settings", nil).want(http.StatusOK, &set)
	if set != (restapi.UserSettings{}) {
		t.Fatalf("settings before any: %+v", set)
	}
	for name, bad := range map[string]map[string]any{
		"unknown voice":     {"voice": "nobody"},
		"too fast":          {"speechSpeed": 2.5},
		"not a language":    {"language": "not a language"},
		"not a time zone":   {"timeZone": "Mars/Olympus_Mons"},
		"the server's zone": {"timeZone": "Local"},
	} {
		t.Run(name, func(t *testing.T) { s.call(t, aliceKey, "PUT", "/v1/settings", bad).wantError(http.StatusBadRequest) })
	}
	settings := hear(t, s.nc, subjects.System(protocol.TypeUserSettings))
	s.call(t, aliceKey, "PUT", "/v1/settings", map[string]any{"voice": "am_adam", "speechSpeed": 0.8, "language": "pt-br", "timeZone": "America/Sao_Paulo"}).
		want(http.StatusOK, &set)
	if set.Voice == nil || *set.Voice != "am_adam" || *set.SpeechSpeed != 0.8 || *set.Language != "pt-BR" || *set.TimeZone != "America/Sao_Paulo" || set.WakeWord != nil {
		t.Fatalf("settings stored %+v", set)
	}
	if got := lastHeard(t, settings); got.Meta["alicia.user_id"] != "alice" || got.Body.(*protocol.UserSettings).UserID != "alice" {
		t.Fatalf("UserSettings published %+v", got)
	}
	var bobs restapi.UserSettings
	s.call(t, bobKey, "GET", "/v1/settings", nil).want(http.StatusOK, &bobs)
	if bobs != (restapi.UserSettings{}) {
		t.Fatalf("bob sees %+v", bobs)
	}

	// A conversation: the person's defaults until it sets its own.
	cid := s.newConversation(t, aliceKey)
	var conv restapi.ConversationWithMessages
	s.call(t, aliceKey, "GET", "/v1/conversations/"+cid, nil).want(http.StatusOK, &conv)
	if p := conv.Preferences; p == nil || p.Voice != "am_adam" || p.VoiceFrom != "person" || p.SpeechSpeed != 0.8 || p.Language != "pt-BR" ||
		p.TimeZone != "America/Sao_Paulo" || p.WakeWord || p.WakeWordFrom != "installation" {
		t.Fatalf("preferences %+v", conv.Preferences)
	}
	path := "/v1/conversations/" + cid + "/preferences"
	s.call(t, aliceKey, "PUT", path, map[string]any{"voice": "nobody"}).wantError(http.StatusBadRequest)
	s.call(t, aliceKey, "PUT", path, map[string]any{"speechSpeed": 0.2}).wantError(http.StatusBadRequest)
	s.call(t, aliceKey, "PUT", path, map[string]any{}).wantError(http.StatusBadRequest)
	s.call(t, bobKey, "PUT", path, map[string]any{"voice": "bm_george"}).wantError(http.StatusForbidden)
	// The client's features (a voice call's): the preferences' Configuration
	// carries them, the llm reading them from the last one.
	voiceFeatures := []protocol.ConfigurationFeaturesElem{protocol.ConfigurationFeaturesElemStreaming, protocol.ConfigurationFeaturesElemAudioOutput}
	s.publish(t, "alice", protocol.New(cid, &protocol.Configuration{ConversationID: &cid, Features: voiceFeatures}))
	configs := hear(t, s.nc, subjects.Client(cid, protocol.TypeConfiguration))
	var eff restapi.EffectivePreferences
	s.call(t, aliceKey, "PUT", path, map[string]any{"voice": "bm_george", "speechSpeed": 1.25, "language": "fr"}).want(http.StatusOK, &eff)
	if eff.Voice != "bm_george" || eff.VoiceFrom != "conversation" || eff.SpeechSpeed != 1.25 || eff.Language != "fr" || eff.LanguageFrom != "conversation" {
		t.Fatalf("after PUT: %+v", eff)
	}
	if c, ok := lastHeard(t, configs).Body.(*protocol.Configuration); !ok || *c.Voice != "bm_george" || *c.PreferredLanguage != "fr" || c.WakeWord != nil ||
		!slices.Equal(c.Features, voiceFeatures) {
		t.Fatalf("Configuration published %+v", c)
	}
	// Back to the person's voice; the rest stays the conversation's.
	s.call(t, aliceKey, "PUT", path, map[string]any{"voice": ""}).want(http.StatusOK, &eff)
	s.call(t, aliceKey, "GET", "/v1/conversations/"+cid, nil).want(http.StatusOK, &conv)
	if p := conv.Preferences; p.Voice != "am_adam" || p.VoiceFrom != "person" || p.SpeechSpeed != 1.25 || p.SpeechSpeedFrom != "conversation" || p.Language != "fr" {
		t.Fatalf("after clearing the voice: %+v", p)
	}
}

// lastHeard is the last envelope h heard, once there is one.
func lastHeard(t *testing.T, h *heard) protocol.Envelope {
	t.Helper()
	testkit.Eventually(t, 5*time.Second, func() bool { return len(h.all()) > 0 }, "an envelope heard")
	msgs := h.all()
	env, err := protocol.Decode(msgs[len(msgs)-1].Data)
	if err != nil {
		t.Fatal(err)
	}
	return env
}
