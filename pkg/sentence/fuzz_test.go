package sentence_test

import (
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/alicia-voice/alicia/pkg/sentence"
)

func TestMinLength(t *testing.T) {
	text := "Yes. I can help with that. Ok.\n```\ncode\n```\nNo."
	tests := []struct {
		name string
		opts []sentence.Option
		want []string
	}{
		{"default keeps short units", nil,
			[]string{"Yes.", "I can help with that.", "Ok.", "\n```\ncode\n```", "\nNo."}},
		{"short units join the next", []sentence.Option{sentence.WithMinLength(8)},
			[]string{"Yes. I can help with that.", "Ok.", "\n```\ncode\n```", "\nNo."}},
		{"everything short joins up", []sentence.Option{sentence.WithMinLength(100)},
			[]string{"Yes. I can help with that. Ok.", "\n```\ncode\n```", "\nNo."}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, chunks := range [][]string{{text}, runes(text)} {
				if got := feed(sentence.New(tc.opts...), chunks); !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("got  %q\nwant %q", got, tc.want)
				}
			}
		})
	}
}

func TestAbbreviationAcrossDeltas(t *testing.T) {
	s := sentence.New()
	for _, d := range []string{"Dr", ".", " ", "Smith", " is here", ".", " "} {
		if got := s.Push(d); len(got) != 0 {
			t.Fatalf("Push(%q) emitted %q before the sentence could be known complete", d, got)
		}
	}
	if got := s.Push("He"); !reflect.DeepEqual(got, []string{"Dr. Smith is here."}) {
		t.Fatalf("got %q", got)
	}
	if got := s.Flush(); !reflect.DeepEqual(got, []string{"He"}) {
		t.Fatalf("Flush = %q", got)
	}
	if got := feed(s, []string{"Reused. Fine."}); !reflect.DeepEqual(got, []string{"Reused.", "Fine."}) {
		t.Fatalf("after Flush: %q", got)
	}
}

// nonSpace keeps the raw bytes of every non-space rune, so a rune cut in two
// would show up as a difference.
func nonSpace(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsSpace(r) {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// lines is text's line structure without its other whitespace: line
// breaks, at most two in a row (a paragraph), between the non-space runes.
func lines(text string) string {
	var b strings.Builder
	for _, r := range strings.TrimSpace(strings.ReplaceAll(text, "\r", "")) {
		if r == '\n' || !unicode.IsSpace(r) {
			b.WriteRune(r)
		}
	}
	out := b.String()
	for strings.Contains(out, "\n\n\n") {
		out = strings.ReplaceAll(out, "\n\n\n", "\n\n")
	}
	return out
}

func FuzzSplitter(f *testing.F) {
	f.Add("Mr. Smith paid $3.50. Then he left... OK?! Yes.", []byte{1, 2, 3}, uint8(0))
	f.Add("Steps:\n1. Go. Now.\n- item\n```go\nx := 1. y\n```\nDone `a. B` ok.", []byte{5, 1}, uint8(0))
	f.Add("你好。「好。」See https://x.com/a.b?c=d. e.g. Python, U.S. He", []byte{2}, uint8(6))
	f.Add("He said 'hi.' Then… “Yes!” ``a`b`` ````\n```", []byte{7, 3, 1}, uint8(12))
	f.Add("Intro.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n\n- x\n- y\r\n\r\nEnd. Yes.", []byte{3}, uint8(5))
	f.Fuzz(func(t *testing.T, text string, cuts []byte, minLen uint8) {
		opt := sentence.WithMinLength(int(minLen % 24))
		whole := feed(sentence.New(opt), []string{text})

		var chunks []string
		rest := text
		for i := 0; len(rest) > 0; i++ {
			n := 1
			if len(cuts) > 0 {
				n = int(cuts[i%len(cuts)]%16) + 1
			}
			n = min(n, len(rest))
			chunks = append(chunks, rest[:n])
			rest = rest[n:]
		}
		pieces := feed(sentence.New(opt), chunks)
		if !reflect.DeepEqual(whole, pieces) {
			t.Fatalf("fed whole:  %q\nfed in %q: %q", whole, chunks, pieces)
		}
		for i, s := range whole {
			body := strings.TrimLeft(s, "\n")
			if brk := len(s) - len(body); body == "" || body != strings.TrimSpace(body) || brk > 2 || i == 0 && brk > 0 {
				t.Fatalf("sentence %q in %q: empty, untrimmed, or a break other than \\n or \\n\\n inside the answer", s, whole)
			}
		}
		joined := strings.Join(whole, " ")
		if got, want := nonSpace(joined), nonSpace(text); got != want {
			t.Fatalf("characters lost or reordered:\n in  %q\n out %q", text, whole)
		}
		if got, want := lines(joined), lines(text); got != want {
			t.Fatalf("lines lost (the answer's Markdown would break):\n in  %q\n out %q", want, got)
		}
	})
}

const benchText = "Sure! Here's how it works. Dr. Smith measured 3.14 units at 5 p.m. on the 2nd floor, e.g. in Room 4. " +
	"See https://example.com/docs/v1.2.3?lang=en for more... Then:\n1. Open the file.\n2. Run `go test ./...` now.\n" +
	"```go\nfmt.Println(\"hi. there\")\n```\nThat's it! Any questions? 你好。谢谢！\n"

// BenchmarkSplitter feeds an answer in token-sized (4-byte) deltas and
// reports the cost per delta.
func BenchmarkSplitter(b *testing.B) {
	var deltas []string
	for rest := benchText; len(rest) > 0; {
		n := min(4, len(rest))
		deltas = append(deltas, rest[:n])
		rest = rest[n:]
	}
	s := sentence.New()
	b.ReportAllocs()
	b.ResetTimer()
	sentences := 0
	for range b.N {
		for _, d := range deltas {
			sentences += len(s.Push(d))
		}
		sentences += len(s.Flush())
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(deltas)), "ns/delta")
	b.ReportMetric(float64(sentences)/float64(b.N), "sentences/op")
}
