package rest

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/restapi"
	"github.com/alicia-voice/alicia/services/gateway/internal/auth"
)

// Timers and reminders are set by the llm's tools; the person sees theirs
// and cancels one here. The llm's replicas hear the cancellation on
// alicia.sys.timer and never deliver it.

// timersRecent is how far back GET /v1/timers shows ended ones; timersMax
// bounds the list.
const (
	timersRecent = 7 * 24 * time.Hour
	timersMax    = 200
)

func (a *API) listTimers(c echo.Context) error {
	ts, err := a.Store.Timers(c.Request().Context(), auth.UserOf(c), time.Now().Add(-timersRecent), timersMax)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, restapi.TimerList{Timers: ts})
}

// cancelTimer publishes the timer's cancelled state; one that fired or was
// cancelled already (or fires meanwhile) is a 409.
func (a *API) cancelTimer(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	user := auth.UserOf(c)
	ctx := c.Request().Context()
	t, owner, err := a.Store.TimerOf(ctx, user, id)
	if err != nil {
		return lookup(err, "timer")
	}
	if t.Status != string(protocol.TimerStatusScheduled) {
		return fail(http.StatusConflict, "timer %s already %s", id, t.Status)
	}
	now := time.Now().UnixMilli()
	body := &protocol.Timer{ID: t.ID, UserID: owner, ConversationID: t.ConversationID, Kind: protocol.TimerKind(t.Kind),
		DueAt: t.DueAt, TimeZone: &t.TimeZone, Status: protocol.TimerStatusCancelled, CreatedAt: t.CreatedAt, Timestamp: now}
	if t.Label != "" {
		body.Label = &t.Label
	}
	if err := a.write(c, asSystemBy(body, user, nil, "timer:"+id+":cancelled")); err != nil {
		return err
	}
	t, _, err = a.Store.TimerOf(ctx, user, id)
	if err != nil {
		return lookup(err, "timer")
	}
	if t.Status != string(protocol.TimerStatusCancelled) {
		return fail(http.StatusConflict, "timer %s %s before it could be cancelled", id, t.Status)
	}
	return c.JSON(http.StatusOK, t)
}
