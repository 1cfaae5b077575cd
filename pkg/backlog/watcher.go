package backlog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
)

// Config tunes a Watcher. Zero values take the defaults.
type Config struct {
	// Limit is the fraction of CONVERSATIONS' MaxBytes the unapplied
	// envelopes may take before Refuse says refuse (ALICIA_STREAM_BACKLOG_LIMIT,
	// DefaultLimit).
	Limit float64
	// Interval is how often the stream and the report are read
	// (DefaultInterval).
	Interval time.Duration
	// Log gets a line when refusing starts and ends, and when the state
	// cannot be read.
	Log zerolog.Logger
}

// Validate reports a limit outside (0, 1] or a negative interval.
func (c Config) Validate() error {
	var errs []error
	if c.Limit != 0 && !validLimit(c.Limit) {
		errs = append(errs, fmt.Errorf("backlog: limit %v: want above 0 and at most 1 (%s)", c.Limit, EnvLimit))
	}
	if c.Interval < 0 {
		errs = append(errs, fmt.Errorf("backlog: interval %v: want ≥ 0", c.Interval))
	}
	return errors.Join(errs...)
}

// Watcher keeps the last estimate of CONVERSATIONS' backlog.
type Watcher struct {
	js    jetstream.JetStream
	cfg   Config
	last  atomic.Pointer[verdict]
	kv    jetstream.KeyValue // set by the refresh goroutine only
	stop  context.CancelFunc
	done  chan struct{}
	once  sync.Once
	state atomic.Pointer[State]
}

// verdict is what Refuse returns, worked out once per refresh.
type verdict struct {
	reason     string
	retryAfter time.Duration
	refuse     bool
}

// Watch reads CONVERSATIONS' state and persistence's report once (an error
// when the stream cannot be read: the user needs $JS.API.STREAM.INFO of
// CONVERSATIONS), then again every Interval until ctx ends or Stop. A
// missing report (the bucket or its key, before persistence first ran)
// counts every envelope of the stream as not applied; a report that
// cannot be read keeps the last one. While the stream cannot be read, the
// last verdict stands.
func Watch(ctx context.Context, js jetstream.JetStream, cfg Config) (*Watcher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Limit == 0 {
		cfg.Limit = DefaultLimit
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	w := &Watcher{js: js, cfg: cfg, done: make(chan struct{})}
	if err := w.refresh(ctx); err != nil {
		return nil, err
	}
	ctx, w.stop = context.WithCancel(ctx)
	go w.run(ctx)
	return w, nil
}

// Refuse says whether an edge should refuse new client input now, why (a
// sentence for the client naming the backlog and the limit) and when to
// try again. A lock-free read of the last refresh.
func (w *Watcher) Refuse() (reason string, retryAfter time.Duration, refuse bool) {
	v := w.last.Load()
	return v.reason, v.retryAfter, v.refuse
}

// State is the last estimate.
func (w *Watcher) State() State { return *w.state.Load() }

// Stop ends the refreshes and waits for them.
func (w *Watcher) Stop() {
	w.once.Do(w.stop)
	<-w.done
}

func (w *Watcher) run(ctx context.Context) {
	defer close(w.done)
	t := time.NewTicker(w.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := w.refresh(ctx); err != nil && ctx.Err() == nil {
			w.cfg.Log.Warn().Err(err).Msg("backlog: could not read CONVERSATIONS' state; keeping the last verdict")
		}
	}
}

// refresh reads the stream and the report and sets the verdict.
func (w *Watcher) refresh(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, max(w.cfg.Interval, 2*time.Second))
	defer cancel()
	s, err := w.js.Stream(rctx, bus.StreamConversations)
	if err != nil {
		return fmt.Errorf("backlog: stream %s: %w", bus.StreamConversations, err)
	}
	info := s.CachedInfo()
	r, ok := w.report(rctx)
	st := Estimate(info, r, ok)
	prev := w.state.Load()
	v := &verdict{}
	if st.Over(w.cfg.Limit) {
		v.refuse, v.reason, v.retryAfter = true, st.reason(w.cfg.Limit), w.retryAfter(st, prev)
	}
	was := w.last.Load()
	switch {
	case v.refuse && (was == nil || !was.refuse):
		w.cfg.Log.Warn().Int64("unapplied_bytes", st.UnappliedBytes).Int64("max_bytes", st.MaxBytes).Uint64("applied_seq", st.Applied).
			Uint64("last_seq", st.LastSeq).Bool("reported", st.Reported).Float64("limit", w.cfg.Limit).
			Msg("refusing new client input: the envelopes persistence has not applied reached the backlog limit of CONVERSATIONS")
	case !v.refuse && was != nil && was.refuse:
		w.cfg.Log.Info().Int64("unapplied_bytes", st.UnappliedBytes).Msg("accepting client input again: persistence caught up")
	}
	w.state.Store(&st)
	w.last.Store(v)
	return nil
}

// report reads persistence's report; on an error the last one read stands.
func (w *Watcher) report(ctx context.Context) (Report, bool) {
	if w.kv == nil {
		kv, err := w.js.KeyValue(ctx, Bucket)
		if err != nil {
			if !errors.Is(err, jetstream.ErrBucketNotFound) {
				w.cfg.Log.Debug().Err(err).Msg("backlog: bucket not readable")
			}
			return w.lastReport()
		}
		w.kv = kv
	}
	r, ok, err := Read(ctx, w.kv)
	if err != nil {
		w.cfg.Log.Debug().Err(err).Msg("backlog: report not readable")
		return w.lastReport()
	}
	return r, ok
}

func (w *Watcher) lastReport() (Report, bool) {
	if s := w.state.Load(); s != nil && s.Reported {
		return Report{Applied: s.Applied, StreamCreated: s.StreamCreated}, true
	}
	return Report{}, false
}

// retryAfter is how long the backlog should take to fall below the limit
// at the rate persistence applied since the last estimate: 1 s to 1 min,
// 10 s when it did not advance.
func (w *Watcher) retryAfter(st State, prev *State) time.Duration {
	const floor, ceiling, unknown = time.Second, time.Minute, 10 * time.Second
	if prev == nil || st.Applied <= prev.Applied || !st.At.After(prev.At) || st.Msgs == 0 {
		return unknown
	}
	rate := float64(st.Applied-prev.Applied) / st.At.Sub(prev.At).Seconds() // envelopes/s
	over := float64(st.UnappliedBytes) - w.cfg.Limit*float64(st.MaxBytes)
	perMsg := float64(st.Bytes) / float64(st.Msgs)
	d := time.Duration(over / perMsg / rate * float64(time.Second))
	return min(max(d, floor), ceiling)
}
