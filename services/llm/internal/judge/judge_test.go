package judge_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/services/llm/internal/judge"
)

func TestParseScores(t *testing.T) {
	for _, c := range []struct {
		name, reply string
		want        judge.Scores
		malformed   bool
	}{
		{"scores", `{"correctness": 1, "faithfulness": 0.25, "relevancy": 0, "rationale": " It  says\nwhat the tool said. "}`,
			judge.Scores{Correctness: 1, Faithfulness: 0.25, Relevancy: 0, Rationale: "It says what the tool said."}, false},
		{"rounding excursion clamped", `{"correctness": 1.0000001, "faithfulness": -0.0000001, "relevancy": 0.5, "rationale": "ok"}`,
			judge.Scores{Correctness: 1, Faithfulness: 0, Relevancy: 0.5, Rationale: "ok"}, false},
		{"not JSON", `Scores: all good!`, judge.Scores{}, true},
		{"a score missing", `{"correctness": 1, "relevancy": 1, "rationale": "ok"}`, judge.Scores{}, true},
		{"a score on another scale", `{"correctness": 8, "faithfulness": 1, "relevancy": 1, "rationale": "ok"}`, judge.Scores{}, true},
		{"a score as text", `{"correctness": "1", "faithfulness": 1, "relevancy": 1, "rationale": "ok"}`, judge.Scores{}, true},
		{"an unknown key", `{"correctness": 1, "faithfulness": 1, "relevancy": 1, "rationale": "ok", "brevity": 1}`, judge.Scores{}, true},
		{"no rationale", `{"correctness": 1, "faithfulness": 1, "relevancy": 1, "rationale": "  "}`, judge.Scores{}, true},
		{"two values", `{"correctness": 1, "faithfulness": 1, "relevancy": 1, "rationale": "ok"} {}`, judge.Scores{}, true},
		{"fenced", "```json\n{\"correctness\": 1, \"faithfulness\": 1, \"relevancy\": 1, \"rationale\": \"ok\"}\n```", judge.Scores{}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := judge.ParseScores(c.reply)
			if c.malformed {
				if !errors.Is(err, judge.ErrMalformed) {
					t.Fatalf("ParseScores(%q) = %+v, %v; want ErrMalformed", c.reply, got, err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("ParseScores(%q) = %+v, %v; want %+v", c.reply, got, err, c.want)
			}
		})
	}
	long, err := judge.ParseScores(`{"correctness": 1, "faithfulness": 1, "relevancy": 1, "rationale": "` + strings.Repeat("a", 1000) + `"}`)
	if err != nil || len([]rune(long.Rationale)) > judge.MaxRationale {
		t.Fatalf("long rationale: %d runes, %v", len([]rune(long.Rationale)), err)
	}
}

// TestSampled: the share judged follows the setting, and an answer is
// sampled or not whatever the delivery (a function of its id).
func TestSampled(t *testing.T) {
	for _, share := range []float64{0, 0.1, 0.5, 1} {
		n := 0
		for i := range 4000 {
			id := fmt.Sprintf("am_%d", i)
			s := judge.Sampled(id, share)
			if s != judge.Sampled(id, share) {
				t.Fatalf("%s sampled differently twice", id)
			}
			if s {
				n++
			}
		}
		if got := float64(n) / 4000; got < share-0.03 || got > share+0.03 {
			t.Fatalf("share %g: %g of the answers sampled", share, got)
		}
	}
}
