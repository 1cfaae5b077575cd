// Package clip shortens text for logs, headers, error messages and
// prompts without cutting a character in two.
package clip

import "unicode/utf8"

// Bytes returns s cut to at most n bytes, on a character boundary (a
// multi-byte character that does not fit is left out whole).
func Bytes(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Runes returns the first n characters of s.
func Runes(s string, n int) string {
	if n <= 0 {
		return ""
	}
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}
