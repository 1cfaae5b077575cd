package persistence

import "testing"

// TestAppliedFloor: every complete scheme of partitions vouches for its
// lowest offset; the best vouches for all; incomplete or foreign rows vouch
// for nothing.
func TestAppliedFloor(t *testing.T) {
	for _, c := range []struct {
		name   string
		stored map[string]uint64
		want   uint64
	}{
		{"nothing stored", nil, 0},
		{"one partition", map[string]uint64{"persistence": 40}, 40},
		{"the rows of before schemes had names", map[string]uint64{"persistence/0": 70, "persistence/1": 65}, 65},
		{"a scheme of three", map[string]uint64{"persistence/0-of-3": 90, "persistence/1-of-3": 80, "persistence/2-of-3": 85}, 80},
		{"an old scheme left behind does not hold the new one back", map[string]uint64{
			"persistence": 10, "persistence/0-of-2": 500, "persistence/1-of-2": 480}, 480},
		{"an incomplete scheme vouches for nothing", map[string]uint64{
			"persistence": 10, "persistence/0-of-3": 500, "persistence/2-of-3": 480}, 10},
		{"another consumer's rows are not ours", map[string]uint64{"persistence": 10, "other/0-of-2": 900, "other/1-of-2": 900}, 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := appliedFloor("persistence", c.stored); got != c.want {
				t.Errorf("floor = %d, want %d", got, c.want)
			}
		})
	}
	parts := shardOffsets("persistence", 2, map[string]uint64{"persistence": 30, "persistence/1-of-2": 50})
	if parts[0].Name != "persistence/0-of-2" || parts[0].Offset != 30 || parts[1].Name != "persistence/1-of-2" || parts[1].Offset != 50 {
		t.Errorf("partitions %+v", parts)
	}
}
