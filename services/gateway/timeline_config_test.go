package gateway_test

import (
	"testing"

	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/services/gateway"
)

func TestTimelineReadsConfig(t *testing.T) {
	var d gateway.TimelineReads
	if err := d.From(config.Environ()); err != nil || d != gateway.DefaultTimelineReads() || d.PerUser != 4 || d.Total != 64 {
		t.Fatalf("defaults %+v: %v", d, err)
	}
	t.Setenv("ALICIA_TIMELINE_READS_PER_USER", "2")
	t.Setenv("ALICIA_TIMELINE_READS", "10")
	var s gateway.TimelineReads
	if err := s.From(config.Environ()); err != nil || s.PerUser != 2 || s.Total != 10 || s.Validate() != nil {
		t.Fatalf("set %+v: %v", s, err)
	}
	t.Setenv("ALICIA_TIMELINE_READS", "x")
	if err := (&gateway.TimelineReads{}).From(config.Environ()); err == nil {
		t.Fatal("a bad ALICIA_TIMELINE_READS is accepted")
	}
	for _, bad := range []gateway.TimelineReads{{PerUser: -1, Total: 4}, {PerUser: 4, Total: -1}, {PerUser: 8, Total: 4}} {
		if bad.Validate() == nil {
			t.Errorf("%+v is valid", bad)
		}
	}
}
