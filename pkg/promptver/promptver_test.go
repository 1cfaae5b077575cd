package promptver_test

import (
	"fmt"
	"math"
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

// TestIntervals: the up-vote rate's Wilson interval and a judged mean's t
// interval, against values computed by hand; no votes is no rate, one
// judged answer says nothing beyond 0..1, and intervals stay within 0..1.
func TestIntervals(t *testing.T) {
	near := func(a, b float64) bool { return math.Abs(a-b) < 0.0015 }
	if _, ok := (promptver.Tally{}).RateInterval(); ok {
		t.Fatal("a rate without votes")
	}
	r, ok := promptver.Tally{Up: 8, Down: 2}.RateInterval()
	if !ok || r.Estimate != 0.8 || !near(r.Low, 0.490) || !near(r.High, 0.943) {
		t.Fatalf("8 of 10 up: %+v, want 0.8 in [0.490, 0.943]", r)
	}
	if r, _ := (promptver.Tally{Up: 3}).RateInterval(); r.High != 1 || !near(r.Low, 0.439) {
		t.Fatalf("3 of 3 up: %+v, want [0.439, 1]", r)
	}
	s := promptver.Score{Mean: 0.5, SD: 0.2}
	if i := s.Interval(4); !near(i.Low, 0.1818) || !near(i.High, 0.8182) {
		t.Fatalf("mean 0.5, sd 0.2 over 4: %+v, want [0.182, 0.818]", i)
	}
	if i := s.Interval(1); i.Low != 0 || i.High != 1 || i.Estimate != 0.5 {
		t.Fatalf("one answer: %+v", i)
	}
	if i := (promptver.Score{Mean: 0.95, SD: 0.3}).Interval(3); i.High != 1 || i.Low < 0 {
		t.Fatalf("clipped: %+v", i)
	}
	if i := s.Interval(1000); !near(i.High-i.Low, 2*1.9624*0.2/math.Sqrt(1000)) {
		t.Fatalf("large n: %+v", i)
	}
}
