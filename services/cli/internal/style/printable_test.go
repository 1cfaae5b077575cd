package style_test

import (
	"testing"

	"github.com/alicia-voice/alicia/services/cli/internal/style"
)

func TestPrintable(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "It is 42.", "It is 42."},
		{"Unicode", "Grüße, 世界 — ½ 🙂 مرحبا \u200e\ufffd", "Grüße, 世界 — ½ 🙂 مرحبا \u200e\ufffd"},
		{"newline and tab", "a\n\tb", "a\n\tb"},
		{"CRLF", "one\r\ntwo", "one\ntwo"},
		{"lone CR rewrites the line", "safe\rEVIL", `safe\x0dEVIL`},
		{"CSI", "\x1b[2J\x1b[Hhi", `\x1b[2J\x1b[Hhi`},
		{"SGR", "\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
		{"OSC with BEL", "\x1b]0;pwned\x07title", `\x1b]0;pwned\x07title`},
		{"OSC 8 link with ST", "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\", `\x1b]8;;https://evil.example\x1b\click\x1b]8;;\x1b\`},
		{"C1 CSI", "\u009b2J", `\u009b2J`},
		{"C1 CSI as a raw byte", "\x9b2J", `\x9b2J`},
		{"NEL", "a\u0085b", `a\u0085b`},
		{"NUL, backspace, DEL", "a\x00\bb\x7f", `a\x00\x08b\x7f`},
		{"bidi override", "abc\u202edcba", `abc\u202edcba`},
		{"bidi embeddings and isolates", "\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069", `\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069`},
		{"truncated UTF-8", "ok\xe4\xb8", `ok\xe4\xb8`},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := style.Printable(tc.in); got != tc.want {
				t.Fatalf("Printable(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
