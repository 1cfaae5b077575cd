package promptver_test

import (
	"fmt"
	"testing"

	"github.com/alicia-voice/alicia/pkg/promptver"
)

// Share spreads conversation ids evenly and always puts one in the same place.
func TestShareSpreads(t *testing.T) {
	below := 0
	for i := range 4000 {
		cid := fmt.Sprintf("ac_%08d", i)
		if promptver.Share(cid) != promptver.Share(cid) {
			t.Fatal("Share is not deterministic")
		}
		if promptver.Share(cid) < 0.5 {
			below++
		}
	}
	if below < 1800 || below > 2200 {
		t.Fatalf("%d of 4000 conversations below 0.5", below)
	}
}

// Choose serves a rollout to the conversations below its share, the full
// version to the rest, nothing when the scope has none.
func TestChoose(t *testing.T) {
	full := promptver.Version{ID: "pv_full", Share: 1}
	half := promptver.Version{ID: "pv_half", Share: 0.5}
	for i := range 200 {
		cid := fmt.Sprintf("ac_%d", i)
		got, ok := promptver.Choose([]promptver.Version{full, half}, cid)
		want := "pv_full"
		if promptver.Share(cid) < 0.5 {
			want = "pv_half"
		}
		if !ok || got.ID != want {
			t.Fatalf("%s: %s, want %s", cid, got.ID, want)
		}
	}
	if _, ok := promptver.Choose(nil, "ac_1"); ok {
		t.Fatal("an empty scope served a version")
	}
	if _, ok := promptver.Choose([]promptver.Version{{ID: "pv_zero", Share: 0}}, "ac_1"); ok {
		t.Fatal("a rollout at 0 with no full version served")
	}
}
