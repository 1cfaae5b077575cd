package gateway_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

type timerJSON struct {
	ID          string  `json:"id"`
	Kind        string  `json:"kind"`
	Label       string  `json:"label"`
	Status      string  `json:"status"`
	DueAt       int64   `json:"dueAt"`
	TimeZone    string  `json:"timeZone"`
	DeliveredAs *string `json:"deliveredAs"`
	EndedAt     *int64  `json:"endedAt"`
}

// GET /v1/timers lists the person's scheduled timers soonest first, then
// the ended ones; DELETE /v1/timers/{id} cancels a scheduled one with a
// Timer on alicia.sys.timer, refuses another person's (403) and an ended
// one (409).
func TestTimersREST(t *testing.T) {
	s := newStack(t)
	var c conversation
	s.call(t, aliceKey, "POST", "/v1/conversations", nil).want(http.StatusCreated, &c)
	now := time.Now()
	zone := "Europe/Paris"
	timer := func(id, label string, due time.Duration, status protocol.TimerStatus) protocol.Envelope {
		return protocol.New("", &protocol.Timer{ID: id, UserID: "alice", ConversationID: c.ID, Kind: protocol.TimerKindReminder, Label: &label,
			DueAt: now.Add(due).UnixMilli(), TimeZone: &zone, Status: status, CreatedAt: now.UnixMilli(), Timestamp: now.UnixMilli()})
	}
	s.publish(t, "alice", timer("atm_later", "later", 2*time.Hour, protocol.TimerStatusScheduled),
		timer("atm_soon", "soon", time.Hour, protocol.TimerStatusScheduled),
		timer("atm_gone", "gone", -time.Hour, protocol.TimerStatusFired))

	var list struct{ Timers []timerJSON }
	s.call(t, aliceKey, "GET", "/v1/timers", nil).want(http.StatusOK, &list)
	if len(list.Timers) != 3 || list.Timers[0].ID != "atm_soon" || list.Timers[1].ID != "atm_later" || list.Timers[2].ID != "atm_gone" ||
		list.Timers[0].TimeZone != zone || list.Timers[0].Kind != "reminder" || list.Timers[2].EndedAt == nil {
		t.Fatalf("alice's timers %+v", list.Timers)
	}
	s.call(t, bobKey, "GET", "/v1/timers", nil).want(http.StatusOK, &list)
	if len(list.Timers) != 0 {
		t.Fatalf("bob sees %+v", list.Timers)
	}
	s.call(t, bobKey, "DELETE", "/v1/timers/atm_soon", nil).wantError(http.StatusForbidden)
	s.call(t, aliceKey, "DELETE", "/v1/timers/atm_nothing", nil).wantError(http.StatusNotFound)
	s.call(t, aliceKey, "DELETE", "/v1/timers/atm_gone", nil).wantError(http.StatusConflict)

	var got timerJSON
	s.call(t, aliceKey, "DELETE", "/v1/timers/atm_soon", nil).want(http.StatusOK, &got)
	if got.Status != "cancelled" || got.EndedAt == nil || got.Label != "soon" {
		t.Fatalf("cancelled %+v", got)
	}
	// The llm's replicas hear it on alicia.sys.timer.
	js, _ := s.nc.JetStream()
	msg, err := js.GetLastMsg("SYSTEM", "alicia.sys.timer")
	if err != nil {
		t.Fatal(err)
	}
	env, err := protocol.Decode(msg.Data)
	if b, ok := env.Body.(*protocol.Timer); err != nil || !ok || b.ID != "atm_soon" || b.Status != protocol.TimerStatusCancelled || b.UserID != "alice" {
		t.Fatalf("timer envelope %+v, %v", env, err)
	}
	s.call(t, aliceKey, "DELETE", "/v1/timers/atm_soon", nil).wantError(http.StatusConflict)
	s.call(t, aliceKey, "GET", "/v1/timers", nil).want(http.StatusOK, &list)
	if len(list.Timers) != 3 || list.Timers[0].ID != "atm_later" || list.Timers[0].Status != "scheduled" {
		t.Fatalf("after the cancellation %+v", list.Timers)
	}
}
