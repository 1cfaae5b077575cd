package style

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Printable makes text that came from the server (a model's answer, a tool's
// output, a memory, an error, a title) safe to write to a terminal, where an
// escape sequence could move the cursor, rewrite the screen or set the
// window title. ESC and every other C0 and C1 control character but newline
// and tab, DEL, bytes that are not UTF-8, and the bidirectional embeddings,
// overrides and isolates (which make a line read differently from what it
// holds) are shown as escapes such as \x1b, \u009b or \u202e. A CR before a
// newline is dropped; everything else passes unchanged.
func Printable(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || unsafeRune(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\r' && strings.HasPrefix(s[i+1:], "\n"):
		case unsafeRune(r) && r < utf8.RuneSelf:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// unsafeRune reports whether r may change what a terminal shows beyond
// printing itself.
func unsafeRune(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || r == 0x7f: // C0, DEL
		return true
	case r >= 0x80 && r <= 0x9f: // C1: U+009B is a CSI of its own
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069: // bidi embeddings, overrides, isolates
		return true
	}
	return false
}

// PrintableValue makes the strings of a decoded JSON value printable.
func PrintableValue(v any) any {
	switch v := v.(type) {
	case string:
		return Printable(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = PrintableValue(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[Printable(k)] = PrintableValue(e)
		}
		return out
	}
	return v
}
