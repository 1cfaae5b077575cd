package gateway

import (
	"errors"
	"fmt"

	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/services/gateway/internal/rest"
)

// TimelineReads bounds the timeline pages (GET
// /v1/conversations/{id}/timeline) read at once on one replica, per user
// and in all: each holds up to 16 envelopes of up to 2 MiB while it is
// read; beyond, 429 with Retry-After. 0: the default.
type TimelineReads struct {
	PerUser int // ALICIA_TIMELINE_READS_PER_USER, default 4
	Total   int // ALICIA_TIMELINE_READS, default 64
}

// DefaultTimelineReads returns the defaults.
func DefaultTimelineReads() TimelineReads {
	return TimelineReads{PerUser: rest.DefaultTimelineReadsPerUser, Total: rest.DefaultTimelineReads}
}

// From overrides t from src, from the defaults where t is zero.
func (t *TimelineReads) From(src config.Source) error {
	d := DefaultTimelineReads()
	if t.PerUser == 0 {
		t.PerUser = d.PerUser
	}
	if t.Total == 0 {
		t.Total = d.Total
	}
	return errors.Join(
		src.Int("ALICIA_TIMELINE_READS_PER_USER", &t.PerUser),
		src.Int("ALICIA_TIMELINE_READS", &t.Total),
	)
}

// Validate reports bounds that are negative or a user's over the total.
func (t TimelineReads) Validate() error {
	var errs []error
	if t.PerUser < 0 || t.Total < 0 {
		errs = append(errs, fmt.Errorf("ALICIA_TIMELINE_READS_PER_USER %d and ALICIA_TIMELINE_READS %d must be at least 1", t.PerUser, t.Total))
	}
	if t.PerUser > 0 && t.Total > 0 && t.PerUser > t.Total {
		errs = append(errs, fmt.Errorf("ALICIA_TIMELINE_READS_PER_USER %d is over ALICIA_TIMELINE_READS %d", t.PerUser, t.Total))
	}
	return errors.Join(errs...)
}

// Limit applies t to api.
func (t TimelineReads) Limit(api *rest.API) { api.LimitTimelineReads(t.PerUser, t.Total) }
