package auth

import (
	"crypto/subtle"
	"strings"
	"testing"
)

// TestKeyComparisonHidesLength: a presented key is compared with every
// configured one as SHA-256 digests, 32 bytes each whatever the lengths,
// so how long the comparison takes tells nothing of a key's length; the
// right key still finds its user.
func TestKeyComparisonHidesLength(t *testing.T) {
	var lengths []int
	constantTimeCompare = func(x, y []byte) int {
		lengths = append(lengths, len(x), len(y))
		return subtle.ConstantTimeCompare(x, y)
	}
	t.Cleanup(func() { constantTimeCompare = subtle.ConstantTimeCompare })
	keys, err := ParseKeys("alice:aaaaaaaaaaaaaaaa,bob:" + strings.Repeat("b", 40))
	if err != nil {
		t.Fatal(err)
	}
	k := NewKeys(keys, nil)
	for _, c := range []struct{ presented, user string }{
		{"aaaaaaaaaaaaaaaa", "alice"},
		{strings.Repeat("b", 40), "bob"},
		{"x", ""},
		{strings.Repeat("a", 17), ""},
		{strings.Repeat("z", 4096), ""},
	} {
		lengths = nil
		user, ok := k.User(c.presented)
		if user != c.user || ok != (c.user != "") {
			t.Errorf("User(%d bytes) = %q %v, want %q", len(c.presented), user, ok, c.user)
		}
		if len(lengths) != 2*len(keys) {
			t.Errorf("User(%d bytes) compared %d times, want every key (%d)", len(c.presented), len(lengths)/2, len(keys))
		}
		for _, n := range lengths {
			if n != 32 {
				t.Errorf("User(%d bytes) compared %v bytes: not SHA-256 digests", len(c.presented), lengths)
				break
			}
		}
	}
}
