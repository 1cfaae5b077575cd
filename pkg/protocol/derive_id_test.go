package protocol_test

import (
	"regexp"
	"testing"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

func TestDeriveID(t *testing.T) {
	shape := regexp.MustCompile(`^am_[0-9A-Za-z]{20}$`)
	a, b := protocol.DeriveID("am", "ac_1", 42), protocol.DeriveID("am", "ac_1", 42)
	if a != b || !shape.MatchString(a) {
		t.Fatalf("ids %q %q: want equal, shaped like NewID", a, b)
	}
	seen := map[string]bool{}
	for _, parts := range [][]any{{"ac_1", 43}, {"ac_2", 42}, {"ac_1", 4, 2}, {"ac_14", 2}} {
		id := protocol.DeriveID("am", parts...)
		if id == a || seen[id] {
			t.Fatalf("parts %v collide: %q", parts, id)
		}
		seen[id] = true
	}
}
