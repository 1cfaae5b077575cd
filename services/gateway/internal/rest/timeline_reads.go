package rest

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/labstack/echo/v4"
)

// Default bounds of the timeline pages read at once (LimitTimelineReads).
const (
	DefaultTimelineReadsPerUser = 4
	DefaultTimelineReads        = 64
)

// timelineReadRetry is the Retry-After of a page refused for the bound, in
// seconds: a page is read in well under that.
const timelineReadRetry = 1

// timelineReads bounds the timeline pages being read at once, per user and
// in all, on this replica: a page holds up to timelineFetch envelopes of up
// to 2 MiB each while it is read. Over a bound a read is refused at once
// (429), never queued: a queue would hold the requests' memory instead.
type timelineReads struct {
	perUser, total int

	mu    sync.Mutex
	users map[string]int
	n     int
}

// acquire takes a slot for user; release gives it back. ok is false, and
// which bound refused it named, when a bound is reached.
func (g *timelineReads) acquire(user string) (release func(), ok bool, perUser bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.perUser > 0 && g.users[user] >= g.perUser {
		return nil, false, true
	}
	if g.total > 0 && g.n >= g.total {
		return nil, false, false
	}
	if g.users == nil {
		g.users = map[string]int{}
	}
	g.users[user]++
	g.n++
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.n--
			if g.users[user]--; g.users[user] <= 0 {
				delete(g.users, user)
			}
		})
	}, true, false
}

// LimitTimelineReads sets how many timeline pages a user (perUser) and all
// users (total) may be reading at once on this replica
// (ALICIA_TIMELINE_READS_PER_USER, ALICIA_TIMELINE_READS); 0 keeps the
// default. Call it before serving.
func (a *API) LimitTimelineReads(perUser, total int) {
	if perUser <= 0 {
		perUser = DefaultTimelineReadsPerUser
	}
	if total <= 0 {
		total = DefaultTimelineReads
	}
	a.readBounds.Store(&timelineReads{perUser: perUser, total: total})
}

func (a *API) timelineReads() *timelineReads {
	if g := a.readBounds.Load(); g != nil {
		return g
	}
	a.readBounds.CompareAndSwap(nil, &timelineReads{perUser: DefaultTimelineReadsPerUser, total: DefaultTimelineReads})
	return a.readBounds.Load()
}

// startTimelineRead takes a timeline read slot for the request's user, or
// answers 429 with Retry-After naming the bound reached.
func (a *API) startTimelineRead(c echo.Context, user string) (release func(), err error) {
	g := a.timelineReads()
	release, ok, perUser := g.acquire(user)
	if ok {
		return release, nil
	}
	c.Response().Header().Set("Retry-After", strconv.Itoa(timelineReadRetry))
	if perUser {
		return nil, fail(http.StatusTooManyRequests,
			"too many timeline reads at once for this user (at most %d, ALICIA_TIMELINE_READS_PER_USER); retry shortly", g.perUser)
	}
	return nil, fail(http.StatusTooManyRequests,
		"too many timeline reads at once on this server (at most %d, ALICIA_TIMELINE_READS); retry shortly", g.total)
}
