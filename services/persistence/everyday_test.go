package persistence_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
)

// TestUserSettings: a person's defaults are stored whole, the newest holds
// over a replayed older one, and nobody sets another person's.
func TestUserSettings(t *testing.T) {
	s := newStack(t)
	s.start()
	speed := 1.25
	s.applied(bus.StreamSystem, s.system(&protocol.UserSettings{UserID: "user-1", Voice: ptr("af_bella"), SpeechSpeed: &speed,
		Language: ptr("fr"), TimeZone: ptr("Europe/Paris"), WakeWord: ptr(true), Timestamp: 2000}, asUser1))
	// Older, replayed: ignored. Another person's, set by user-1: dead-lettered.
	s.system(&protocol.UserSettings{UserID: "user-1", Voice: ptr("old"), Timestamp: 1000}, asUser1)
	s.applied(bus.StreamSystem, s.system(&protocol.UserSettings{UserID: "user-2", Voice: ptr("x"), Timestamp: 3000}, asUser1))
	settings := func() string {
		t.Helper()
		var voice, lang, zone *string
		var sp *float32
		var wake *bool
		if err := s.pool.QueryRow(context.Background(), `SELECT voice, speech_speed, language, time_zone, wake_word
			FROM alicia_user_settings WHERE user_id = 'user-1'`).Scan(&voice, &sp, &lang, &zone, &wake); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal([]any{voice, sp, lang, zone, wake})
		return string(b)
	}
	if got := settings(); got != `["af_bella",1.25,"fr","Europe/Paris",true]` {
		t.Fatalf("settings %s", got)
	}
	if n := s.queryInt(`SELECT count(*) FROM alicia_user_settings WHERE user_id = 'user-2'`); n != 0 {
		t.Fatal("user-1 set user-2's settings")
	}
	// A newer one holds whole: what it leaves out goes back to the installation's default.
	s.applied(bus.StreamSystem, s.system(&protocol.UserSettings{UserID: "user-1", TimeZone: ptr("America/New_York"), Timestamp: 4000}, asUser1))
	if got := settings(); got != `[null,null,null,"America/New_York",null]` {
		t.Fatalf("settings after a newer partial one %s", got)
	}
}

// TestTimerStates: a timer's latest state holds; a fired one never changes
// again, an older state never overwrites a newer, a redelivery changes nothing.
func TestTimerStates(t *testing.T) {
	s := newStack(t)
	s.start()
	timer := func(id string, st protocol.TimerStatus, ts int64) *protocol.Timer {
		return &protocol.Timer{ID: id, UserID: "user-1", ConversationID: "ac_timers", Kind: protocol.TimerKindTimer,
			Label: ptr("tea"), DueAt: 5000, TimeZone: ptr("Europe/Paris"), Status: st, CreatedAt: 1000, Timestamp: ts}
	}
	fired := timer("atm_a", protocol.TimerStatusFired, 5100)
	as := protocol.TimerDeliveredAsSpoken
	fired.DeliveredAs, fired.MessageID = &as, ptr("am_fired")
	s.system(timer("atm_a", protocol.TimerStatusScheduled, 1000), nil)
	s.system(fired, nil)
	s.system(timer("atm_a", protocol.TimerStatusCancelled, 5200), nil) // too late: it fired
	s.system(timer("atm_a", protocol.TimerStatusScheduled, 1000), nil) // a redelivery of the first
	s.system(timer("atm_b", protocol.TimerStatusScheduled, 1000), nil)
	s.applied(bus.StreamSystem, s.system(timer("atm_b", protocol.TimerStatusCancelled, 2000), nil))
	state := func(id string) string {
		t.Helper()
		var st, label, zone string
		var as, msg *string
		if err := s.pool.QueryRow(context.Background(), `SELECT status, label, time_zone, delivered_as, message_id
			FROM alicia_timers WHERE id = $1`, id).Scan(&st, &label, &zone, &as, &msg); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal([]any{st, label, zone, as, msg})
		return string(b)
	}
	if got := state("atm_a"); got != `["fired","tea","Europe/Paris","spoken","am_fired"]` {
		t.Fatalf("atm_a %s", got)
	}
	if got := state("atm_b"); got != `["cancelled","tea","Europe/Paris",null,null]` {
		t.Fatalf("atm_b %s", got)
	}
	if n := s.queryInt(`SELECT count(*) FROM alicia_timers WHERE status = 'scheduled'`); n != 0 {
		t.Fatalf("%d timers still scheduled", n)
	}
}

// TestConversationVoicePreferences: a conversation's Configuration sets its
// voice, speaking rate and hands-free mode beside its language.
func TestConversationVoicePreferences(t *testing.T) {
	s := newStack(t)
	s.start()
	speed := 0.75
	s.client("ac_prefs", 1, &protocol.Configuration{PreferredLanguage: ptr("de")}, asUser1)
	seq := s.client("ac_prefs", 2, &protocol.Configuration{Voice: ptr("bf_emma"), SpeechSpeed: &speed, WakeWord: ptr(true)}, asUser1)
	s.applied(bus.StreamConversations, seq)
	var prefs []byte
	if err := s.pool.QueryRow(context.Background(), `SELECT preferences FROM alicia_conversations WHERE id = 'ac_prefs'`).Scan(&prefs); err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	_ = json.Unmarshal(prefs, &p)
	if p["preferredLanguage"] != "de" || p["voice"] != "bf_emma" || p["speechSpeed"] != 0.75 || p["wakeWord"] != true {
		t.Fatalf("preferences %s", prefs)
	}
}
