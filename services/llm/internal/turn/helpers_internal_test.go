package turn

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/alicia-voice/alicia/services/llm/internal/tools"
)

func TestDeriveID(t *testing.T) {
	shape := regexp.MustCompile(`^am_[0-9A-Za-z]{20}$`)
	a, b := deriveID("am", "ac_1", 42), deriveID("am", "ac_1", 42)
	if a != b || !shape.MatchString(a) {
		t.Fatalf("ids %q %q: want equal, shaped like protocol.NewID", a, b)
	}
	seen := map[string]bool{}
	for _, parts := range [][]any{{"ac_1", 43}, {"ac_2", 42}, {"ac_1", 4, 2}, {"ac_14", 2}} {
		id := deriveID("am", parts...)
		if id == a || seen[id] {
			t.Fatalf("parts %v collide: %q", parts, id)
		}
		seen[id] = true
	}
}

func TestParseArguments(t *testing.T) {
	for _, c := range []struct {
		raw  string
		keys int
		bad  bool
	}{
		{`{"expression":"1+1"}`, 1, false},
		{``, 0, false},
		{`null`, 0, false},
		{`{"a":`, 0, true},
		{`[1,2]`, 0, true},
		{`"text"`, 0, true},
	} {
		t.Run(c.raw, func(t *testing.T) {
			args, err := parseArguments(c.raw)
			if (err != nil) != c.bad || len(args) != c.keys || args == nil {
				t.Fatalf("args %v, err %v", args, err)
			}
			if err != nil && !errors.Is(err, tools.ErrInvalidParameters) {
				t.Fatalf("err = %v, want ErrInvalidParameters", err)
			}
		})
	}
}

func TestCut(t *testing.T) {
	long := strings.Repeat("é", 100) // 200 bytes
	got := cut(long, 51)
	if len(got) > 51 || !utf8.ValidString(got) || !strings.HasSuffix(got, "…[truncated]") {
		t.Fatalf("cut = %q (%d bytes)", got, len(got))
	}
	if cut("short", 51) != "short" {
		t.Fatal("short text changed")
	}
}
