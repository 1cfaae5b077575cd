package titles_test

import (
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/services/llm/internal/titles"
)

// TestDue: a conversation without a title or with a placeholder is titled
// after its first answer; a generated title is asked again only at the
// revisit counts, a few times at most; the person's never.
func TestDue(t *testing.T) {
	for _, c := range []struct {
		source             string
		generations, count int
		revisit, due       bool
	}{
		{"none", 0, 0, false, false},
		{"none", 0, 1, false, true},
		{"provisional", 0, 1, false, true},
		{"provisional", 0, 2, false, true}, // the first try failed
		{"generated", 1, 2, false, false},
		{"generated", 1, 4, true, true},
		{"generated", 2, 12, true, true},
		{"generated", 3, 12, false, false}, // enough titles
		{"generated", 1, 5, false, false},
		{"person", 0, 1, false, false},
		{"person", 0, 4, false, false},
	} {
		revisit, due := titles.Due(c.source, c.generations, c.count)
		if revisit != c.revisit || due != c.due {
			t.Errorf("Due(%s, %d generated, %d answers) = %v, %v; want %v, %v", c.source, c.generations, c.count, revisit, due, c.revisit, c.due)
		}
	}
}

// TestClean: a model's reply becomes a title: first line, no quotes,
// markup, label or final punctuation, bounded; KEEP is none.
func TestClean(t *testing.T) {
	for reply, want := range map[string]string{
		"Weather in Paris":      "Weather in Paris",
		"\"Weather in Paris.\"": "Weather in Paris",
		"Title: **Planning a trip to Lyon**\n\nI chose this because": "Planning a trip to Lyon",
		"KEEP":                        "",
		" keep. ":                     "",
		"Why is the sky blue?":        "Why is the sky blue?",
		"":                            "",
		"A\tvery   spaced\u0007title": "A very spaced title",
	} {
		if got := titles.Clean(reply); got != want {
			t.Errorf("Clean(%q) = %q, want %q", reply, got, want)
		}
	}
	if n := len([]rune(titles.Clean("word " + strings.Repeat("abcdefghij", 20)))); n > 80 {
		t.Errorf("a long reply gave a title of %d runes, want at most 80", n)
	}
}
