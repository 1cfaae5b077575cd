package clip_test

import (
	"testing"
	"unicode/utf8"

	"github.com/alicia-voice/alicia/pkg/clip"
)

func TestBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"hello", 10, "hello"}, {"hello", 3, "hel"}, {"héllo", 2, "h"}, {"héllo", 3, "hé"},
		{"日本語", 4, "日"}, {"日本語", 6, "日本"}, {"🙂x", 3, ""}, {"abc", 0, ""}, {"abc", -1, ""},
	} {
		got := clip.Bytes(tc.in, tc.n)
		if got != tc.want || !utf8.ValidString(got) || len(got) > max(tc.n, 0) {
			t.Errorf("Bytes(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func TestRunes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"hello", 10, "hello"}, {"héllo", 2, "hé"}, {"日本語", 2, "日本"}, {"abc", 0, ""}, {"", 3, ""},
	} {
		if got := clip.Runes(tc.in, tc.n); got != tc.want {
			t.Errorf("Runes(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
