package session

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// WarnAt is the share of the bucket's bytes above which Watch warns: sign-in
// fails once the bucket is full.
const WarnAt = 0.8

// warnEvery repeats the warning while the bucket stays over WarnAt.
const warnEvery = time.Hour

var (
	metricsOnce          sync.Once
	bytesGauge, maxGauge prometheus.Gauge
)

// RegisterMetrics registers the bucket's gauges on the default registry
// (once).
func RegisterMetrics() {
	metricsOnce.Do(func() {
		bytesGauge = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "alicia", Subsystem: "gateway", Name: "sessions_bytes",
			Help: "Bytes the SESSIONS bucket (web client sessions) holds, as the gateway last read it."})
		maxGauge = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "alicia", Subsystem: "gateway", Name: "sessions_max_bytes",
			Help: "Bytes the SESSIONS bucket may hold: once it is full, nobody can sign in."})
		prometheus.DefaultRegisterer.MustRegister(bytesGauge, maxGauge)
	})
}

// Usage is what the bucket holds and the most it may hold, in bytes.
func (s *Store) Usage(ctx context.Context) (bytes, maxBytes uint64, err error) {
	st, err := s.kv.Status(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("session: bucket status: %w", err)
	}
	info := st.(*jetstream.KeyValueBucketStatus).StreamInfo()
	return info.State.Bytes, uint64(max(0, info.Config.MaxBytes)), nil
}

// Watch reads the bucket's size now and every interval until ctx ends:
// into the gauges (RegisterMetrics), and a warning in the log while it is
// over WarnAt full (when it gets there, then hourly).
func (s *Store) Watch(ctx context.Context, every time.Duration) {
	RegisterMetrics()
	tick := time.NewTicker(every)
	defer tick.Stop()
	var warned time.Time
	for {
		s.sample(ctx, &warned)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (s *Store) sample(ctx context.Context, warned *time.Time) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	used, most, err := s.Usage(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn().Err(err).Msg("read the size of the sessions bucket")
		}
		return
	}
	bytesGauge.Set(float64(used))
	maxGauge.Set(float64(most))
	if most == 0 || float64(used) <= WarnAt*float64(most) {
		*warned = time.Time{}
		return
	}
	if now := s.now(); warned.IsZero() || now.Sub(*warned) >= warnEvery {
		*warned = now
		s.log.Warn().Uint64("bytes", used).Uint64("max_bytes", most).Float64("full", float64(used)/float64(most)).
			Msgf("the sessions bucket %s is over %.0f%% full: once it is full nobody can sign in (sessions are capped per user by ALICIA_SESSIONS_PER_USER)", Bucket, WarnAt*100)
	}
}
