package backlog

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// State is one estimate of the backlog.
type State struct {
	// At is when the stream's state was read.
	At time.Time
	// FirstSeq and LastSeq are the stream's; Msgs and Bytes what it holds.
	FirstSeq, LastSeq, Msgs, Bytes uint64
	// StreamCreated tells this stream from another of the same name.
	StreamCreated time.Time
	// MaxBytes is the stream's size limit, -1 (or 0) for none.
	MaxBytes int64
	// Applied is how far persistence has applied the stream: its report,
	// or FirstSeq−1 when there is none for this stream (everything the
	// stream holds counts as not applied).
	Applied uint64
	// Reported says whether Applied is persistence's report.
	Reported bool
	// Unapplied is how many envelopes follow Applied; UnappliedBytes their
	// estimated size, Unapplied × Bytes/Msgs.
	Unapplied      uint64
	UnappliedBytes int64
	// Lost says envelopes persistence had not applied are no longer in the
	// stream (FirstSeq > Applied+1).
	Lost bool
}

// Estimate is the backlog of a stream whose info is info, persistence's
// report r (ok: there is one).
func Estimate(info *jetstream.StreamInfo, r Report, ok bool) State {
	st := info.State
	s := State{At: time.Now(), FirstSeq: st.FirstSeq, LastSeq: st.LastSeq, Msgs: st.Msgs, Bytes: st.Bytes,
		StreamCreated: info.Created, MaxBytes: info.Config.MaxBytes}
	floor := uint64(0)
	if st.FirstSeq > 0 {
		floor = st.FirstSeq - 1
	}
	s.Applied = floor
	if ok && r.StreamCreated.Equal(info.Created) {
		s.Applied, s.Reported = r.Applied, true
		s.Lost = st.Msgs > 0 && st.FirstSeq > r.Applied+1
	}
	base := max(s.Applied, floor)
	if st.LastSeq > base {
		s.Unapplied = st.LastSeq - base
	}
	if st.Msgs > 0 {
		s.UnappliedBytes = int64(min(float64(s.Unapplied)*float64(st.Bytes)/float64(st.Msgs), float64(st.Bytes)))
	}
	return s
}

// Over reports whether the backlog is at or over limit × MaxBytes; never
// when the stream has no size limit.
func (s State) Over(limit float64) bool {
	return s.MaxBytes > 0 && float64(s.UnappliedBytes) >= limit*float64(s.MaxBytes)
}

// Ratio is the backlog's share of MaxBytes (0 without a size limit).
func (s State) Ratio() float64 {
	if s.MaxBytes <= 0 {
		return 0
	}
	return float64(s.UnappliedBytes) / float64(s.MaxBytes)
}

// reason is what a refused client is told.
func (s State) reason(limit float64) string {
	who := "envelopes persistence has not stored yet"
	if !s.Reported {
		who = "envelopes persistence has not reported storing yet"
	}
	return fmt.Sprintf("server busy: CONVERSATIONS holds about %s of %s (%.0f%% of its %s), at or over the limit of %.0f%% (%s); new input is refused until persistence catches up",
		mib(s.UnappliedBytes), who, 100*s.Ratio(), mib(s.MaxBytes), 100*limit, EnvLimit)
}

func mib(n int64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
