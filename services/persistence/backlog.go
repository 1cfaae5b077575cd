package persistence

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/backlog"
	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/services/persistence/internal/consume"
)

// backlogReporter tells the edges how far CONVERSATIONS is applied, so
// they refuse new client input before the stream's size limit could drop
// an envelope not applied yet (pkg/backlog), and sets the backlog gauges
// of both streams for the alerts. Every instance reports what it knows of
// every partition (its own loop, the others' announcements): a report a
// little behind only makes the edges more careful.
type backlogReporter struct {
	js       jetstream.JetStream
	kv       jetstream.KeyValue
	progress map[string]*consume.Progress
	interval time.Duration
	m        *metrics
	log      zerolog.Logger
}

func newBacklogReporter(ctx context.Context, js jetstream.JetStream, replicas int, progress map[string]*consume.Progress, interval time.Duration, log zerolog.Logger) (*backlogReporter, error) {
	kv, err := backlog.EnsureBucket(ctx, js, replicas)
	if err != nil {
		return nil, fmt.Errorf("persistence: %w", err)
	}
	return &backlogReporter{js: js, kv: kv, progress: progress, interval: interval, m: defaultMetrics(), log: log}, nil
}

// run reports at once, then every interval until ctx ends.
func (b *backlogReporter) run(ctx context.Context) error {
	t := time.NewTicker(b.interval)
	defer t.Stop()
	for {
		b.report(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (b *backlogReporter) report(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, max(b.interval, 2*time.Second))
	defer cancel()
	for stream, p := range b.progress {
		s, err := b.js.Stream(ctx, stream)
		if err != nil {
			if ctx.Err() == nil {
				b.log.Warn().Err(err).Str("stream", stream).Msg("backlog: could not read the stream's state")
			}
			continue
		}
		info := s.CachedInfo()
		r := backlog.Report{Applied: p.AppliedAll(), StreamCreated: info.Created}
		st := backlog.Estimate(info, r, true)
		b.m.AppliedSeq.WithLabelValues(stream).Set(float64(st.Applied))
		b.m.StreamFirstSeq.WithLabelValues(stream).Set(float64(st.FirstSeq))
		b.m.BacklogBytes.WithLabelValues(stream).Set(float64(st.UnappliedBytes))
		b.m.StreamMaxBytes.WithLabelValues(stream).Set(float64(st.MaxBytes))
		if st.Lost {
			b.log.Error().Str("stream", stream).Uint64("applied_seq", st.Applied).Uint64("first_seq", st.FirstSeq).
				Msg("envelopes not applied yet are no longer in the stream: its limits dropped them")
		}
		if stream != bus.StreamConversations {
			continue
		}
		if err := backlog.Publish(ctx, b.kv, r); err != nil && ctx.Err() == nil {
			b.log.Warn().Err(err).Msg("backlog: report not written; the edges keep the last one")
		}
	}
}
