package timers

import (
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// A resync adds what is stored scheduled and ends what is no longer stored
// scheduled (its fired or cancelled state was missed live), except a timer
// set too recently to be stored yet or one being delivered here.
func TestResync(t *testing.T) {
	s, err := New(DefaultConfig(), nil, nil, nil, Hooks{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	timer := func(id string, set time.Time) *protocol.Timer {
		return &protocol.Timer{ID: id, UserID: "u", ConversationID: "ac_1", Kind: protocol.TimerKindTimer, Status: protocol.TimerStatusScheduled,
			DueAt: now.Add(time.Hour).UnixMilli(), CreatedAt: set.UnixMilli(), Timestamp: set.UnixMilli()}
	}
	s.apply(timer("atm_missed", now.Add(-time.Minute)))
	s.apply(timer("atm_new", now.Add(-time.Second)))
	s.apply(timer("atm_busy", now.Add(-time.Minute)))
	s.busy["atm_busy"] = true
	s.apply(timer("atm_kept", now.Add(-time.Minute)))
	s.resync([]*protocol.Timer{timer("atm_kept", now.Add(-time.Minute)), timer("atm_stored", now.Add(-time.Minute))}, now)
	var got []string
	for _, tm := range s.Scheduled("u") {
		got = append(got, tm.ID)
	}
	want := map[string]bool{"atm_new": true, "atm_busy": true, "atm_kept": true, "atm_stored": true}
	if len(got) != len(want) {
		t.Fatalf("scheduled after the resync %v, want %v", got, want)
	}
	for _, id := range got {
		if !want[id] {
			t.Fatalf("scheduled after the resync %v, want %v", got, want)
		}
	}
	// An ended one is never scheduled again by a stale envelope.
	s.apply(timer("atm_missed", now.Add(-time.Minute)))
	if len(s.Scheduled("u")) != len(want) {
		t.Fatal("a missed timer came back")
	}
}
