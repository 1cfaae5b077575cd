package think_test

import (
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/services/llm/internal/think"
)

// run feeds content split at every possible pair of positions and checks
// the reasoning and answer come out the same.
func TestFilter(t *testing.T) {
	cases := []struct {
		name, in, reasoning, answer string
		blocks                      int
	}{
		{"plain", "Hello there. a < b", "", "Hello there. a < b", 0},
		{"block first", "<think>The user greets.</think>Hi!", "The user greets.", "Hi!", 1},
		{"block in the middle", "Sure. <think>check 2+2</think>It is 4.", "check 2+2", "Sure. It is 4.", 1},
		{"two blocks", "<think>a</think>x<think>b</think>y", "ab", "xy", 2},
		{"unclosed block", "<think>still thinking", "still thinking", "", 1},
		{"almost a tag", "<thin k> and </think", "", "<thin k> and </think", 0},
		{"tag at the very end", "answer<think>", "", "answer", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i := 0; i <= len(c.in); i++ {
				for j := i; j <= len(c.in); j++ {
					var f think.Filter
					var parts []think.Part
					for _, d := range []string{c.in[:i], c.in[i:j], c.in[j:]} {
						parts = append(parts, f.Push(d)...)
					}
					parts = append(parts, f.Flush()...)
					var r, a strings.Builder
					blocks := 0
					for _, p := range parts {
						switch {
						case p.End:
							blocks++
						case p.Reasoning:
							r.WriteString(p.Text)
						default:
							a.WriteString(p.Text)
						}
					}
					if r.String() != c.reasoning || a.String() != c.answer || blocks != c.blocks {
						t.Fatalf("split %d/%d: reasoning %q answer %q blocks %d", i, j, r.String(), a.String(), blocks)
					}
				}
			}
		})
	}
}
