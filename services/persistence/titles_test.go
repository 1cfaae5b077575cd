package persistence_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// TestTitleSources: a client's provisional title gives way to a generated
// one, a generated one to a later one and to the person's rename, and
// nothing replaces the person's: a generated or provisional title after
// it is not taken. Generated titles are counted.
func TestTitleSources(t *testing.T) {
	s := newStack(t)
	s.start()
	cid := "ac_titles"
	s.applied("CONVERSATIONS", s.client(cid, 1, &protocol.Configuration{ConversationID: ptr(cid)}, map[string]any{"alicia.user_id": "u1"}))
	title := func(text, source string) {
		t.Helper()
		var meta map[string]any
		if source != "" {
			meta = map[string]any{protocol.MetaTitleSource: source}
		}
		seq := s.server(cid, &protocol.ConversationUpdate{ConversationID: cid, Title: ptr(text), UpdatedAt: time.Now().UnixMilli()}, meta)
		s.applied("CONVERSATIONS", seq)
	}
	want := func(text, source string, generations int) {
		t.Helper()
		var got, src string
		var n int
		if err := s.pool.QueryRow(context.Background(), `SELECT title, title_source, title_generations FROM alicia_conversations WHERE id = $1`, cid).
			Scan(&got, &src, &n); err != nil {
			t.Fatal(err)
		}
		if got != text || src != source || n != generations {
			t.Fatalf("title %q (%s, %d generated), want %q (%s, %d)", got, src, n, text, source, generations)
		}
	}
	want("", "none", 0)
	title("What is the weather like in", protocol.TitleProvisional)
	want("What is the weather like in", "provisional", 0)
	title("Weather in Paris", protocol.TitleGenerated)
	want("Weather in Paris", "generated", 1)
	title("Another placeholder", protocol.TitleProvisional)
	want("Weather in Paris", "generated", 1)
	title("Paris trip planning", protocol.TitleGenerated)
	want("Paris trip planning", "generated", 2)
	title("My trip", "") // a rename
	want("My trip", "person", 2)
	title("Something generated", protocol.TitleGenerated)
	title("Some placeholder", protocol.TitleProvisional)
	want("My trip", "person", 2)
}
