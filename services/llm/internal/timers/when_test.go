package timers_test

import (
	"testing"
	"time"

	"github.com/alicia-voice/alicia/services/llm/internal/timers"
)

func TestParseDuration(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
	}{
		{"PT10M", 10 * time.Minute}, {"pt1h30m", 90 * time.Minute}, {"P1DT2H", 26 * time.Hour}, {"PT2S", 2 * time.Second},
		{"10m", 10 * time.Minute}, {"1h 30m", 90 * time.Minute}, {"10 minutes", 10 * time.Minute},
		{"1 hour 30 minutes", 90 * time.Minute}, {"90 seconds", 90 * time.Second}, {"2 days", 48 * time.Hour},
	} {
		got, err := timers.ParseDuration(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "a while", "P", "PT"} {
		if _, err := timers.ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) accepted", bad)
		}
	}
}

func TestParseWhen(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 29, 17, 30, 0, 0, paris) // 16:30 UTC
	for _, c := range []struct {
		in   string
		want time.Time
	}{
		{"2026-11-29T18:00", time.Date(2026, 11, 29, 18, 0, 0, 0, paris)},
		{"2026-11-29T18:00:00Z", time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)},
		{"18:00", time.Date(2026, 11, 29, 18, 0, 0, 0, paris)},
		{"6pm", time.Date(2026, 11, 29, 18, 0, 0, 0, paris)},
		{"9:15 am", time.Date(2026, 11, 30, 9, 15, 0, 0, paris)}, // passed today: tomorrow
		{"17:00", time.Date(2026, 11, 30, 17, 0, 0, 0, paris)},
		{"in 2 hours", now.Add(2 * time.Hour)},
		{"PT45M", now.Add(45 * time.Minute)},
	} {
		got, err := timers.ParseWhen(c.in, now, paris)
		if err != nil || !got.Equal(c.want) {
			t.Errorf("ParseWhen(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	if _, err := timers.ParseWhen("tomorrowish", now, paris); err == nil {
		t.Error("an unreadable time accepted")
	}
}
