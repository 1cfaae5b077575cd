package timers

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// isoDuration is an ISO-8601 duration without years or months (PT10M, P1DT2H).
var isoDuration = regexp.MustCompile(`^P(?:(\d+(?:\.\d+)?)W)?(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?$`)

// wordDuration is "10 minutes", "1 hour 30 minutes", "90s", "2h".
var wordDuration = regexp.MustCompile(`(\d+(?:\.\d+)?)\s*(weeks?|w|days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)\b`)

// ParseDuration reads what a model gives for a duration: ISO-8601 (PT10M),
// Go's form (1h30m) or words (10 minutes, 1 hour 30 minutes).
func ParseDuration(s string) (time.Duration, error) {
	in := strings.TrimSpace(s)
	if in == "" {
		return 0, fmt.Errorf("the duration is empty: give one like PT10M or 10m")
	}
	if m := isoDuration.FindStringSubmatch(strings.ToUpper(in)); m != nil && len(in) > 1 && !strings.HasSuffix(strings.ToUpper(in), "T") {
		units := []time.Duration{7 * 24 * time.Hour, 24 * time.Hour, time.Hour, time.Minute, time.Second}
		var d time.Duration
		for i, u := range units {
			if m[i+1] == "" {
				continue
			}
			f, _ := strconv.ParseFloat(m[i+1], 64)
			d += time.Duration(f * float64(u))
		}
		return d, nil
	}
	if d, err := time.ParseDuration(strings.ReplaceAll(in, " ", "")); err == nil {
		return d, nil
	}
	lower := strings.ToLower(in)
	matches := wordDuration.FindAllStringSubmatch(lower, -1)
	if len(matches) == 0 {
		return 0, fmt.Errorf("cannot read the duration %q: give one like PT10M, 10m or 1h30m", s)
	}
	var d time.Duration
	for _, m := range matches {
		f, _ := strconv.ParseFloat(m[1], 64)
		var u time.Duration
		switch m[2][0] {
		case 'w':
			u = 7 * 24 * time.Hour
		case 'd':
			u = 24 * time.Hour
		case 'h':
			u = time.Hour
		case 'm':
			u = time.Minute
		default:
			u = time.Second
		}
		d += time.Duration(f * float64(u))
	}
	return d, nil
}

// localLayouts are the local times a model may give, read in the person's zone.
var localLayouts = []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04"}

// ParseWhen reads when a reminder is due, at now in loc: an ISO-8601 time
// with an offset (2026-11-29T18:00:00+01:00), a local one
// (2026-11-29T18:00, read in loc), a time of day (18:00, 6pm: the next one
// to come), or a relative expression ("in 2 hours", "PT2H", "+90m").
func ParseWhen(s string, now time.Time, loc *time.Location) (time.Time, error) {
	in := strings.TrimSpace(s)
	if in == "" {
		return time.Time{}, fmt.Errorf("the time is empty: give a local time like 2026-11-29T18:00 or a relative one like \"in 2 hours\"")
	}
	if t, err := time.Parse(time.RFC3339, in); err == nil {
		return t, nil
	}
	for _, l := range localLayouts {
		if t, err := time.ParseInLocation(l, in, loc); err == nil {
			return t, nil
		}
	}
	if t, ok := timeOfDay(in, now, loc); ok {
		return t, nil
	}
	rel := strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(strings.ToLower(in), "in "), "+"))
	if d, err := ParseDuration(rel); err == nil {
		return now.Add(d), nil
	}
	return time.Time{}, fmt.Errorf("cannot read the time %q: give a local ISO-8601 time like 2026-11-29T18:00, a time of day like 18:00, or a relative one like \"in 2 hours\"", s)
}

var clock = regexp.MustCompile(`^(\d{1,2})(?::(\d{2}))?\s*(am|pm|a\.m\.|p\.m\.)?$`)

// timeOfDay reads 18:00, 6pm or 6:30 am as the next such time in loc.
func timeOfDay(s string, now time.Time, loc *time.Location) (time.Time, bool) {
	m := clock.FindStringSubmatch(strings.ToLower(s))
	if m == nil || (m[2] == "" && m[3] == "") {
		return time.Time{}, false
	}
	h, _ := strconv.Atoi(m[1])
	mi := 0
	if m[2] != "" {
		mi, _ = strconv.Atoi(m[2])
	}
	switch strings.ReplaceAll(m[3], ".", "") {
	case "pm":
		if h < 12 {
			h += 12
		}
	case "am":
		if h == 12 {
			h = 0
		}
	}
	if h > 23 || mi > 59 {
		return time.Time{}, false
	}
	local := now.In(loc)
	t := time.Date(local.Year(), local.Month(), local.Day(), h, mi, 0, 0, loc)
	if !t.After(now) {
		t = time.Date(local.Year(), local.Month(), local.Day()+1, h, mi, 0, 0, loc)
	}
	return t, true
}

// Local is how a time is told to the model and the person: in their zone.
func Local(t time.Time, loc *time.Location) string {
	return t.In(loc).Format("Monday 2 January 2006, 15:04:05 MST") + " (" + loc.String() + ")"
}
