package auth_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/alicia-voice/alicia/services/gateway/internal/auth"
)

func TestParseKeys(t *testing.T) {
	keys, err := auth.ParseKeys(" alice:aaaaaaaaaaaaaaaaaaaa , bbbbbbbbbbbbbbbbbbbb")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || keys[0].User != "alice" || keys[1].User == "" || keys[1].User == keys[0].User {
		t.Fatalf("keys = %+v", keys)
	}
	again, _ := auth.ParseKeys("bbbbbbbbbbbbbbbbbbbb")
	if again[0].User != keys[1].User {
		t.Fatal("the user of an anonymous key is not stable")
	}
	for _, bad := range []string{"", " , ", "short", "bob:short"} {
		if _, err := auth.ParseKeys(bad); err == nil {
			t.Errorf("ParseKeys(%q) accepted", bad)
		}
	}
}

func TestMiddleware(t *testing.T) {
	keys, _ := auth.ParseKeys("alice:aaaaaaaaaaaaaaaaaaaa")
	e := echo.New()
	e.GET("/x", func(c echo.Context) error { return c.String(http.StatusOK, auth.UserOf(c)) }, auth.NewKeys(keys).Middleware())
	for _, c := range []struct {
		name, header, query string
		status              int
		body                string
	}{
		{"bearer", "Bearer aaaaaaaaaaaaaaaaaaaa", "", 200, "alice"},
		{"token query", "", "?token=aaaaaaaaaaaaaaaaaaaa", 200, "alice"},
		{"wrong key", "Bearer aaaaaaaaaaaaaaaaaaab", "", 401, ""},
		{"no key", "", "", 401, ""},
		{"not bearer", "Basic aaaaaaaaaaaaaaaaaaaa", "", 401, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/x"+c.query, nil)
			if c.header != "" {
				req.Header.Set("Authorization", c.header)
			}
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, req)
			if rec.Code != c.status || (c.body != "" && rec.Body.String() != c.body) {
				t.Fatalf("status %d body %q", rec.Code, rec.Body.String())
			}
		})
	}
}
