package rest

import (
	"github.com/alicia-voice/alicia/pkg/restapi"

	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"
)

// TestTimelineReadsBound: a user holds at most perUser timeline reads at
// once, everyone together at most total; a finished read frees its slot
// (once, however often released).
func TestTimelineReadsBound(t *testing.T) {
	g := &timelineReads{perUser: 2, total: 3}
	take := func(user string, wantOK, wantPerUser bool) func() {
		t.Helper()
		release, ok, perUser := g.acquire(user)
		if ok != wantOK || !ok && perUser != wantPerUser {
			t.Fatalf("acquire(%s) = ok %v, per user %v; want %v, %v", user, ok, perUser, wantOK, wantPerUser)
		}
		return release
	}
	a1 := take("ann", true, false)
	take("ann", true, false)
	take("ann", false, true) // ann's bound
	take("bob", true, false)
	take("cy", false, false) // the total
	a1()
	a1() // a second release frees nothing more
	take("cy", true, false)
	take("dee", false, false)
	take("ann", false, false) // under ann's bound, over the total
}

// TestTimelineReadsConcurrent: however many reads race, never more than
// the bounds are held at once (go test -race).
func TestTimelineReadsConcurrent(t *testing.T) {
	g := &timelineReads{perUser: 3, total: 5}
	var mu sync.Mutex
	held, most := map[string]int{}, 0
	var wg sync.WaitGroup
	for i := range 200 {
		user := []string{"ann", "bob", "cy"}[i%3]
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, ok, _ := g.acquire(user)
			if !ok {
				return
			}
			mu.Lock()
			held[user]++
			n := held["ann"] + held["bob"] + held["cy"]
			most = max(most, n)
			if held[user] > 3 || n > 5 {
				t.Errorf("held %v", held)
			}
			mu.Unlock()
			mu.Lock()
			held[user]--
			mu.Unlock()
			release()
		}()
	}
	wg.Wait()
	if g.n != 0 || len(g.users) != 0 {
		t.Fatalf("slots left after every read: %d %v", g.n, g.users)
	}
}

// TestTimelinePageOverTheBound: GET /v1/conversations/{id}/timeline beyond
// the bound answers 429 with Retry-After and a JSON error naming the
// limit, before anything is read; another user still gets a slot.
func TestTimelinePageOverTheBound(t *testing.T) {
	a := &API{Log: zerolog.Nop()}
	a.LimitTimelineReads(1, 2)
	held, ok, _ := a.timelineReads().acquire("ann")
	if !ok {
		t.Fatal("the first read is refused")
	}
	defer held()
	e := echo.New()
	e.HTTPErrorHandler = ErrorHandler(zerolog.Nop())
	as := func(user string) echo.MiddlewareFunc {
		return func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c echo.Context) error { c.Set("alicia.user", user); return next(c) }
		}
	}
	e.GET("/ann/conversations/:id/timeline", a.conversationTimeline, as("ann"))

	w := httptest.NewRecorder()
	e.ServeHTTP(w, httptest.NewRequest("GET", "/ann/conversations/ac_x/timeline", nil))
	var body restapi.Error
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != http.StatusTooManyRequests ||
		w.Header().Get("Retry-After") != "1" || !strings.Contains(body.Error.Message, "ALICIA_TIMELINE_READS_PER_USER") ||
		body.Error.Code != http.StatusTooManyRequests {
		t.Fatalf("over the user's bound: %d Retry-After %q %s", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	bob, ok, _ := a.timelineReads().acquire("bob")
	if !ok {
		t.Fatal("another user is refused under the total")
	}
	defer bob()
	// The total (2) is reached: cy is refused, naming ALICIA_TIMELINE_READS.
	e.GET("/cy/conversations/:id/timeline", a.conversationTimeline, as("cy"))
	w = httptest.NewRecorder()
	e.ServeHTTP(w, httptest.NewRequest("GET", "/cy/conversations/ac_x/timeline", nil))
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), "ALICIA_TIMELINE_READS)") || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("over the total: %d %s", w.Code, w.Body)
	}
}
