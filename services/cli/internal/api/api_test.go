package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/alicia-voice/alicia/services/cli/internal/api"
)

func TestWebSocketEndpoint(t *testing.T) {
	for _, tc := range []struct{ base, want string }{
		{"http://127.0.0.1:8080", "ws://127.0.0.1:8080/v1/ws"},
		{"https://alicia.example.com", "wss://alicia.example.com/v1/ws"},
		{"https://example.com/alicia", "wss://example.com/alicia/v1/ws"},
	} {
		t.Run(tc.base, func(t *testing.T) {
			if got := api.WebSocketEndpoint(tc.base); got != tc.want {
				t.Fatalf("WebSocketEndpoint(%q) = %q, want %q", tc.base, got, tc.want)
			}
		})
	}
}

// TestKeyNeverInAURL calls every REST route of the client and checks that
// each request carries the key in its Authorization header and nowhere in
// its URL (which proxies write to their access logs).
func TestKeyNeverInAURL(t *testing.T) {
	const key = "rest-key/with+odd&chars=0123456789"
	type seen struct{ uri, auth string }
	var (
		mu   sync.Mutex
		reqs []seen
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reqs = append(reqs, seen{r.RequestURI, r.Header.Get("Authorization")})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.Method {
		case http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		case http.MethodPost:
			_, _ = w.Write([]byte(`{"id":"ac_1"}`))
		default:
			if r.URL.Path == "/v1/conversations" {
				_, _ = w.Write([]byte(`{"conversations":[],"nextCursor":""}`))
				return
			}
			_, _ = w.Write([]byte(`{"id":"ac_1","messages":[]}`))
		}
	}))
	defer srv.Close()
	c, err := api.New(srv.URL, key)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.ListConversations(ctx, api.ListOptions{Status: "all", Limit: 5, Cursor: "c1"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.GetConversation(ctx, "ac_1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateConversation(ctx, "a title"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteConversation(ctx, "ac_1"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reqs) != 4 {
		t.Fatalf("%d requests, want 4", len(reqs))
	}
	for _, r := range reqs {
		if r.auth != "Bearer "+key {
			t.Errorf("%s: Authorization = %q, want the key as Bearer", r.uri, r.auth)
		}
		for _, form := range []string{key, url.QueryEscape(key), url.PathEscape(key)} {
			if strings.Contains(r.uri, form) {
				t.Errorf("request URL %q holds the key", r.uri)
			}
		}
	}
}
