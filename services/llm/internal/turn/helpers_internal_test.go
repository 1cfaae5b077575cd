package turn

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/alicia-voice/alicia/services/llm/internal/tools"
)

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
