package turn

import (
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/rpc"
)

// A barge-in (cut) forgets a conversation's branch, and a turn that read
// the generation before the cut does not remember its branch after it —
// even once the cut generations were emptied to stay bounded.
func TestBranchesCut(t *testing.T) {
	msgs := []rpc.HistoryMessage{{ID: "am_u"}, {ID: "am_a"}}
	cases := []struct {
		name string
		// between runs after the turn read its generation and before it remembers.
		between  func(b *branches)
		remember bool
	}{
		{"nothing happened", func(*branches) {}, true},
		{"another conversation cut", func(b *branches) { b.cut("ac_other") }, true},
		{"this conversation cut", func(b *branches) { b.cut("ac_1") }, false},
		{"cut, then the cut generations emptied", func(b *branches) {
			b.cut("ac_1")
			for i := range 4 {
				b.cut(string(rune('a' + i)))
			}
		}, false},
		{"others filled and emptied the cut generations", func(b *branches) {
			for i := range 5 {
				b.cut(string(rune('a' + i)))
			}
		}, false}, // a miss, never a stale branch
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newBranches(4, time.Hour)
			gen := b.generation("ac_1")
			c.between(b)
			b.remember("ac_1", gen, 7, 5, msgs)
			_, ok := b.branch("ac_1", 5, 7, false, 8)
			if ok != c.remember {
				t.Fatalf("remembered = %v, want %v", ok, c.remember)
			}
		})
	}
	t.Run("cut forgets what was remembered", func(t *testing.T) {
		b := newBranches(4, time.Hour)
		b.remember("ac_1", b.generation("ac_1"), 7, 5, msgs)
		if _, ok := b.branch("ac_1", 5, 7, false, 8); !ok {
			t.Fatal("not remembered")
		}
		b.cut("ac_1")
		if _, ok := b.branch("ac_1", 5, 7, false, 8); ok {
			t.Fatal("still remembered after the cut")
		}
		b.remember("ac_1", b.generation("ac_1"), 9, 8, msgs)
		if _, ok := b.branch("ac_1", 8, 9, false, 10); !ok {
			t.Fatal("a turn after the cut does not remember")
		}
	})
}
