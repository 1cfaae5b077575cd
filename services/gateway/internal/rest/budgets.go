package rest

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/services/gateway/internal/auth"
)

// budgets are the budgets the API applies: those of Accounts, the same
// the WebSocket applies, or Budgets without them (zero fields: defaults).
func (a *API) budgets() edge.Budgets {
	if a.Accounts == nil {
		return a.Budgets.WithDefaults()
	}
	return a.Accounts.Budgets()
}

// overBudget answers a request refused for a budget: 429 naming it, with
// Retry-After when it frees at a known time.
func (a *API) overBudget(c echo.Context, o *edge.OverBudget) error {
	edge.RefusalMetrics().WithLabelValues(o.Budget).Inc()
	now := a.Accounts.Now() // the clock FreeAt was computed on
	if d := o.RetryAfter(now); d > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(d.Seconds()))))
	}
	return fail(http.StatusTooManyRequests, "%s", o.Message(now))
}

// budgetText checks a text field against its budget (400 naming it), then
// as text does.
func budgetText(budget, field, s string, limit int, required bool) error {
	if o := edge.CheckText(budget, field, s, limit); o != nil {
		edge.RefusalMetrics().WithLabelValues(o.Budget).Inc()
		return fail(http.StatusBadRequest, "%s", o.Message(time.Now()))
	}
	return text(field, s, math.MaxInt, required)
}

// admitStored refuses a write of size bytes by a user over the stored
// budget (429).
func (a *API) admitStored(c echo.Context, size int) error {
	if a.Accounts == nil {
		return nil
	}
	if o := a.Accounts.Stored(auth.UserOf(c), int64(size)); o != nil {
		return a.overBudget(c, o)
	}
	return nil
}

// admitConversation refuses conversation cid over the user's hourly
// budget (429).
func (a *API) admitConversation(c echo.Context, cid string) error {
	if a.Accounts == nil {
		return nil
	}
	if o := a.Accounts.Conversation(auth.UserOf(c), cid); o != nil {
		return a.overBudget(c, o)
	}
	return nil
}
