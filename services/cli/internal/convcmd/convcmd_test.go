package convcmd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"

	"github.com/alicia-voice/alicia/services/cli/internal/api"
	"github.com/alicia-voice/alicia/services/cli/internal/apitest"
	"github.com/alicia-voice/alicia/services/cli/internal/convcmd"
	"github.com/alicia-voice/alicia/services/cli/internal/style"
)

const key = "test-key-0123456789"

func client(t *testing.T, base, k string) *api.Client {
	t.Helper()
	c, err := api.New(base, k)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ms(h, m int) int64 { return time.Date(2025, 5, 1, h, m, 0, 0, time.Local).UnixMilli() }

func TestNewListDelete(t *testing.T) {
	srv := apitest.New(t, key)
	c := client(t, srv.URL, key)
	ctx := context.Background()

	var out bytes.Buffer
	if err := convcmd.New(ctx, c, "Trip to Lisbon", &out); err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(out.String())
	if !strings.HasPrefix(id, "ac_") || strings.Contains(id, " ") {
		t.Fatalf("new printed %q, want only the id", out.String())
	}
	if got := srv.Requests()[0]; got.Method != "POST" || got.Path != "/v1/conversations" || got.Auth != "Bearer "+key || got.Body["title"] != "Trip to Lisbon" {
		t.Fatalf("new sent %+v", got)
	}
	out.Reset()
	if err := convcmd.New(ctx, c, "", &out); err != nil {
		t.Fatal(err)
	}
	if got := srv.Requests()[1]; len(got.Body) != 0 {
		t.Fatalf("new without --title sent body %v, want {}", got.Body)
	}
	untitled := strings.TrimSpace(out.String())
	srv.Add(api.ConversationDetail{Conversation: api.Conversation{ID: "ac_old", Title: "Archived one", Status: "archived", UpdatedAt: ms(9, 0), MessageCount: 7}})

	out.Reset()
	if err := convcmd.List(ctx, c, convcmd.ListOptions{}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[0], "TITLE") || !strings.Contains(lines[0], "MESSAGES") {
		t.Fatalf("list:\n%s", out.String())
	}
	// Newest first: the untitled one was created after the titled one.
	if !strings.HasPrefix(lines[1], untitled) || !strings.Contains(lines[1], "(untitled)") ||
		!strings.HasPrefix(lines[2], id) || !strings.Contains(lines[2], "Trip to Lisbon") || !strings.Contains(lines[2], "active") {
		t.Fatalf("list rows:\n%s", out.String())
	}
	if strings.Contains(out.String(), "ac_old") {
		t.Fatalf("archived conversation listed by default:\n%s", out.String())
	}

	out.Reset()
	if err := convcmd.List(ctx, c, convcmd.ListOptions{Status: "archived"}, &out); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("ac_old  Archived one  archived  %s  7", time.UnixMilli(ms(9, 0)).Format(convcmd.TimeFormat))
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 2 || strings.Join(strings.Fields(lines[1]), " ") != strings.Join(strings.Fields(want), " ") {
		t.Fatalf("list --status archived:\n%s\nwant row %q", out.String(), want)
	}
	if q := srv.Requests()[len(srv.Requests())-1].Query; !strings.Contains(q, "status=archived") {
		t.Fatalf("query %q has no status filter", q)
	}

	out.Reset()
	if err := convcmd.List(ctx, c, convcmd.ListOptions{Status: "all", JSON: true}, &out); err != nil {
		t.Fatal(err)
	}
	var convs []map[string]any
	if err := json.Unmarshal(out.Bytes(), &convs); err != nil || len(convs) != 3 || convs[0]["id"] != untitled {
		t.Fatalf("list --json = %s (%v)", out.String(), err)
	}

	out.Reset()
	if err := convcmd.Delete(ctx, c, id, &out); err != nil {
		t.Fatal(err)
	}
	if got := srv.Requests()[len(srv.Requests())-1]; got.Method != "DELETE" || got.Path != "/v1/conversations/"+id {
		t.Fatalf("delete sent %+v", got)
	}
	out.Reset()
	if err := convcmd.List(ctx, c, convcmd.ListOptions{}, &out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), id) {
		t.Fatalf("deleted conversation still listed:\n%s", out.String())
	}
	if err := convcmd.List(ctx, c, convcmd.ListOptions{Status: "gone"}, &out); err == nil {
		t.Fatal("--status gone accepted")
	}
}

func TestListPages(t *testing.T) {
	srv := apitest.New(t, key)
	srv.PageSize = 2
	for i := range 5 {
		srv.Add(api.ConversationDetail{Conversation: api.Conversation{ID: fmt.Sprintf("ac_%d", i), Status: "active", UpdatedAt: ms(10, i)}})
	}
	c := client(t, srv.URL, key)
	for _, tc := range []struct {
		name  string
		limit int
		want  []string
		calls int
	}{
		{"all pages", 0, []string{"ac_4", "ac_3", "ac_2", "ac_1", "ac_0"}, 3},
		{"stops at the limit", 3, []string{"ac_4", "ac_3", "ac_2"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(srv.Requests())
			var out bytes.Buffer
			if err := convcmd.List(context.Background(), c, convcmd.ListOptions{Limit: tc.limit, JSON: true}, &out); err != nil {
				t.Fatal(err)
			}
			var convs []api.Conversation
			if err := json.Unmarshal(out.Bytes(), &convs); err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, cv := range convs {
				ids = append(ids, cv.ID)
			}
			if strings.Join(ids, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("ids = %v, want %v", ids, tc.want)
			}
			if calls := len(srv.Requests()) - before; calls != tc.calls {
				t.Fatalf("%d requests, want %d", calls, tc.calls)
			}
			if last := srv.Requests()[len(srv.Requests())-1]; tc.calls > 1 && !strings.Contains(last.Query, "cursor=") {
				t.Fatalf("last page asked without the cursor: %q", last.Query)
			}
		})
	}
}

func TestShow(t *testing.T) {
	srv := apitest.New(t, key)
	srv.Add(api.ConversationDetail{
		Conversation: api.Conversation{ID: "ac_show", Title: "Maths", Status: "active", UpdatedAt: ms(12, 5)},
		Messages: []api.Message{
			{ID: "am_u1", Role: "user", Content: "What is 2+2?", Status: "completed", CreatedAt: ms(12, 1)},
			{ID: "am_a1", PreviousID: protocol.Ptr("am_u1"), Role: "assistant", Content: "It is 4.", Status: "completed", CreatedAt: ms(12, 1), SiblingCount: 2,
				MemoriesUsed: []api.MemoryUse{{MemoryID: "amem_1", Content: "The user likes\nmaths", Similarity: 0.834}},
				Reasoning:    []api.Reasoning{{Sequence: 1, Content: "Add the numbers."}},
				ToolUses: []api.ToolUse{
					{ID: "atu_1", ToolName: "calculator", Arguments: jsonOf(map[string]any{"expression": "2+2"}), Result: jsonOf(4), Status: "success"},
					{ID: "atu_2", ToolName: "web_search", Arguments: jsonOf(map[string]any{"q": "2+2"}), Status: "error", ErrorCode: protocol.Ptr("timeout"), ErrorMessage: protocol.Ptr("no answer in 30s")},
				}},
			{ID: "am_u2", PreviousID: protocol.Ptr("am_a1"), Role: "user", Content: "Tell me a long story", Status: "completed", CreatedAt: ms(12, 4)},
			{ID: "am_a2", PreviousID: protocol.Ptr("am_u2"), Role: "assistant", Content: "Once upon", Status: "completed", Interrupted: true, CreatedAt: ms(12, 5)},
		},
	})
	c := client(t, srv.URL, key)
	var out bytes.Buffer
	if err := convcmd.Show(context.Background(), c, convcmd.ShowOptions{ID: "ac_show"}, &out); err != nil {
		t.Fatal(err)
	}
	at := func(h, m int) string { return "[" + time.UnixMilli(ms(h, m)).Format(convcmd.TimeFormat) + "]" }
	want := []string{
		"ac_show  Maths  (active, 4 messages, updated " + time.UnixMilli(ms(12, 5)).Format(convcmd.TimeFormat) + ")",
		"",
		at(12, 1) + " you> What is 2+2?",
		"",
		"        [memory] The user likes maths (0.83)",
		"        [reasoning] Add the numbers.",
		`        [tool] calculator({"expression":"2+2"}) → 4`,
		`        [tool] web_search({"q":"2+2"}) failed (timeout): no answer in 30s`,
		at(12, 1) + " alicia> It is 4. [2 versions]",
		"",
		at(12, 4) + " you> Tell me a long story",
		"",
		at(12, 5) + " alicia> Once upon [interrupted]",
	}
	if got := strings.Split(strings.TrimRight(out.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("show:\n%s\nwant:\n%s", out.String(), strings.Join(want, "\n"))
	}
	if strings.Contains(out.String(), "\x1b[") {
		t.Fatal("ANSI escapes without a terminal")
	}

	out.Reset()
	if err := convcmd.Show(context.Background(), c, convcmd.ShowOptions{ID: "ac_show", Style: style.Style{Color: true}}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "\x1b[2m[tool] calculator") {
		t.Fatalf("tool use not dimmed on a terminal:\n%q", out.String())
	}

	out.Reset()
	if err := convcmd.Show(context.Background(), c, convcmd.ShowOptions{ID: "ac_show", JSON: true}, &out); err != nil {
		t.Fatal(err)
	}
	var got api.ConversationDetail
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || len(got.Messages) != 4 || got.Messages[1].ToolUses[1].ErrorCode == nil || *got.Messages[1].ToolUses[1].ErrorCode != "timeout" {
		t.Fatalf("show --json = %s (%v)", out.String(), err)
	}
}

func TestErrors(t *testing.T) {
	srv := apitest.New(t, key)
	srv.AddForeign("ac_bob")
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "upstream connect error\nmore", http.StatusBadGateway)
	}))
	defer proxy.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()

	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		run    func(c *api.Client) error
		base   string
		key    string
		status int
		msg    string
	}{
		{"unknown conversation", func(c *api.Client) error {
			return convcmd.Show(ctx, c, convcmd.ShowOptions{ID: "ac_missing"}, &bytes.Buffer{})
		}, srv.URL, key, 404, "GET /v1/conversations/ac_missing: 404 Not Found: conversation not found"},
		{"another user's", func(c *api.Client) error { return convcmd.Delete(ctx, c, "ac_bob", &bytes.Buffer{}) },
			srv.URL, key, 403, "DELETE /v1/conversations/ac_bob: 403 Forbidden: conversation belongs to another user"},
		{"wrong key", func(c *api.Client) error { return convcmd.List(ctx, c, convcmd.ListOptions{}, &bytes.Buffer{}) },
			srv.URL, "not-the-key-at-all", 401, "GET /v1/conversations: 401 Unauthorized: missing or invalid API key"},
		{"not the API", func(c *api.Client) error { return convcmd.New(ctx, c, "", &bytes.Buffer{}) },
			proxy.URL, key, 502, "POST /v1/conversations: 502 Bad Gateway: upstream connect error"},
		{"nothing listening", func(c *api.Client) error { return convcmd.List(ctx, c, convcmd.ListOptions{}, &bytes.Buffer{}) },
			closed, key, 0, "cannot reach the gateway at " + closed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run(client(t, tc.base, tc.key))
			if err == nil {
				t.Fatal("no error")
			}
			if api.StatusOf(err) != tc.status || !strings.Contains(err.Error(), tc.msg) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error = %q (status %d), want status %d and %q on one line", err, api.StatusOf(err), tc.status, tc.msg)
			}
			if tc.status == 0 && !errors.Is(err, api.ErrUnreachable) {
				t.Fatalf("%v is not ErrUnreachable", err)
			}
		})
	}
	if _, err := api.New(srv.URL, ""); !errors.Is(err, api.ErrNoKey) {
		t.Fatalf("no key: %v", err)
	}
}

func TestBaseURL(t *testing.T) {
	for _, tc := range []struct{ in, want, ws string }{
		{"", "http://127.0.0.1:8080", "ws://127.0.0.1:8080/v1/ws"},
		{"127.0.0.1:9000", "http://127.0.0.1:9000", "ws://127.0.0.1:9000/v1/ws"},
		{":8080", "http://127.0.0.1:8080", ""},
		{"0.0.0.0:8080", "http://127.0.0.1:8080", ""},
		{"https://alicia.example.com/", "https://alicia.example.com", "wss://alicia.example.com/v1/ws"},
		{"ws://host:1", "http://host:1", ""},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := api.BaseURL(tc.in)
			if err != nil || got != tc.want {
				t.Fatalf("BaseURL(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
			if tc.ws != "" {
				if ws := api.WebSocketEndpoint(got); ws != tc.ws {
					t.Fatalf("WebSocketEndpoint = %q, want %q", ws, tc.ws)
				}
			}
		})
	}
	for _, bad := range []string{"ftp://host", "http://"} {
		if _, err := api.BaseURL(bad); err == nil {
			t.Errorf("BaseURL(%q) accepted", bad)
		}
	}
}

// TestHostileTextIsPrintable: a title, a message and a tool result that
// came from the server reach the terminal of `alicia list` and `alicia
// show` with their escape sequences shown, never run.
func TestHostileTextIsPrintable(t *testing.T) {
	srv := apitest.New(t, key)
	srv.Add(api.ConversationDetail{Conversation: api.Conversation{ID: "ac_hostile", Title: "Trip\x1b]0;pwned\x07", Status: "active", UpdatedAt: ms(9, 0), MessageCount: 1},
		Messages: []api.Message{{ID: "am_1", Role: "assistant", Content: "sure\x1b[2J\u202eevil", CreatedAt: ms(9, 0),
			ToolUses: []api.ToolUse{{ToolName: "web_search", Status: "success", Result: jsonOf(map[string]any{"text": "\x9b31m"})}}}}})
	c := client(t, srv.URL, key)
	var out bytes.Buffer
	if err := convcmd.List(context.Background(), c, convcmd.ListOptions{}, &out); err != nil {
		t.Fatal(err)
	}
	if err := convcmd.Show(context.Background(), c, convcmd.ShowOptions{ID: "ac_hostile"}, &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, raw := range []string{"\x1b", "\x07", "\u202e", "\u009b"} {
		if strings.Contains(got, raw) {
			t.Fatalf("output holds %q:\n%q", raw, got)
		}
	}
	for _, shown := range []string{`Trip\x1b]0;pwned\x07`, `sure\x1b[2J\u202eevil`} {
		if !strings.Contains(got, shown) {
			t.Fatalf("output lacks %s:\n%s", shown, got)
		}
	}
}

// jsonOf is v as a stored JSON value.
func jsonOf(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
