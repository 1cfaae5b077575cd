// Package timers is the llm's timers and reminders: the tools that set,
// list and cancel them (tools.go) and the scheduler every replica runs,
// which knows every scheduled timer (loaded from alicia_timers at start,
// then heard live on alicia.sys.timer) and delivers each due one exactly
// once over all replicas (deliver.go).
//
// Lifecycle: Start loads and subscribes and returns; from then on the
// scheduler is running (a timer due while every replica was down fires at
// once). Close stops the loop and waits for deliveries under way; a
// delivery cut short by a crash is taken over by another replica (or this
// one after its restart) with the same message ids, which JetStream
// de-duplicates.
package timers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/prefs"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/subjects"
)

// ClaimBucket is the KeyValue bucket in which a replica claims a due timer
// before delivering it (stream KV_TIMER_CLAIMS).
const ClaimBucket = "TIMER_CLAIMS"

// Config tunes timers (the llm's ALICIA_LLM_TIMERS_* and ALICIA_TIME_ZONE).
type Config struct {
	// TimeZone is the installation's default IANA zone, for people who set
	// none (ALICIA_TIME_ZONE, default UTC).
	TimeZone string
	// PerUser caps a person's scheduled timers (ALICIA_LLM_TIMERS_PER_USER).
	PerUser int
	// MaxAhead bounds how far ahead one may be set (ALICIA_LLM_TIMERS_MAX_AHEAD).
	MaxAhead time.Duration
	// ClaimTimeout: a claim older than this whose timer has not fired is
	// taken over (its replica died mid-delivery; ALICIA_LLM_TIMERS_CLAIM_TIMEOUT).
	ClaimTimeout time.Duration
	// Resync: how often the scheduled timers are read again from Postgres,
	// in case a live envelope was missed (ALICIA_LLM_TIMERS_RESYNC).
	Resync time.Duration
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{TimeZone: "UTC", PerUser: 50, MaxAhead: 366 * 24 * time.Hour, ClaimTimeout: 30 * time.Second, Resync: time.Minute}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if _, err := time.LoadLocation(c.TimeZone); err != nil || c.TimeZone == "" {
		errs = append(errs, fmt.Errorf("ALICIA_TIME_ZONE %q is not an IANA time zone (e.g. Europe/Paris, UTC)", c.TimeZone))
	}
	if c.PerUser < 1 {
		errs = append(errs, fmt.Errorf("ALICIA_LLM_TIMERS_PER_USER %d must be at least 1", c.PerUser))
	}
	if c.MaxAhead < time.Minute {
		errs = append(errs, fmt.Errorf("ALICIA_LLM_TIMERS_MAX_AHEAD %s is under a minute", c.MaxAhead))
	}
	// Under JetStream's 2-minute de-duplication window, so a taken-over
	// delivery's publishes are de-duplicated.
	if c.ClaimTimeout < time.Second || c.ClaimTimeout > 90*time.Second {
		errs = append(errs, fmt.Errorf("ALICIA_LLM_TIMERS_CLAIM_TIMEOUT %s is outside 1s..90s", c.ClaimTimeout))
	}
	if c.Resync < time.Second {
		errs = append(errs, fmt.Errorf("ALICIA_LLM_TIMERS_RESYNC %s is under a second", c.Resync))
	}
	return errors.Join(errs...)
}

// Hooks report what the scheduler does (metrics).
type Hooks struct {
	// Set: a timer scheduled by a tool, by kind.
	Set func(kind string)
	// Delivered: a timer delivered by this replica, how (spoken, message)
	// and how late after its due time.
	Delivered func(as string, late time.Duration)
	// Cancelled: a timer cancelled by a tool.
	Cancelled func()
	// Failed: a delivery that failed (retried).
	Failed func()
	// Scheduled: the number of scheduled timers now known.
	Scheduled func(n int)
}

// Scheduler knows every scheduled timer and delivers the due ones.
type Scheduler struct {
	cfg     Config
	defLoc  *time.Location
	nc      *nats.Conn
	js      jetstream.JetStream
	pub     *bus.Publisher
	db      Querier
	log     zerolog.Logger
	hooks   Hooks
	replica string
	now     func() time.Time

	kv   jetstream.KeyValue
	subs *bus.Subscriptions

	mu      sync.Mutex
	pending map[string]*protocol.Timer // scheduled
	ended   map[string]time.Time       // fired or cancelled ids, with when heard
	busy    map[string]bool            // being delivered here
	retryAt map[string]time.Time       // not before (claimed elsewhere, failed)
	wake    chan struct{}

	zmu   sync.Mutex
	zones map[string]zoneEntry

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type zoneEntry struct {
	loc *time.Location
	at  time.Time
}

// New returns a scheduler; Start starts it.
func New(cfg Config, nc *nats.Conn, js jetstream.JetStream, db Querier, hooks Hooks, log zerolog.Logger) (*Scheduler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	loc, _ := time.LoadLocation(cfg.TimeZone)
	return &Scheduler{cfg: cfg, defLoc: loc, nc: nc, js: js, pub: bus.NewPublisher(js), db: db, hooks: hooks,
		log: log.With().Str("component", "timers").Logger(), replica: nuid.Next(), now: time.Now,
		pending: map[string]*protocol.Timer{}, ended: map[string]time.Time{}, busy: map[string]bool{}, retryAt: map[string]time.Time{},
		wake: make(chan struct{}, 1), zones: map[string]zoneEntry{}}, nil
}

// Start creates the claims bucket, subscribes to alicia.sys.timer, loads
// the scheduled timers once persistence has applied the SYSTEM stream, and
// starts the delivery loop. ctx bounds the start only.
func (s *Scheduler) Start(ctx context.Context, replicas int) error {
	kv, err := s.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: ClaimBucket, History: 1,
		Description: "timers being delivered: the replica that claimed each",
		Storage:     jetstream.FileStorage, Replicas: max(replicas, 1), TTL: 7 * 24 * time.Hour, MaxValueSize: 1 << 10})
	if err != nil {
		return fmt.Errorf("timers: bucket %s: %w", ClaimBucket, err)
	}
	s.kv = kv
	s.ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	rt := bus.NewRoutes("llm-timers", s.log)
	bus.On(rt, "timer", subjects.System(protocol.TypeTimer), func(_ context.Context, _ protocol.Envelope, t *protocol.Timer, _ bus.Inbound) error {
		s.apply(t)
		return nil
	})
	subs, err := rt.Subscribe(s.ctx, s.nc)
	if err != nil {
		s.cancel()
		return fmt.Errorf("timers: %w", err)
	}
	s.subs = subs
	// Subscribed at the server before the rows are read: a state
	// published from now on is heard, an earlier one is in the rows.
	if err := s.nc.Flush(); err != nil {
		subs.Close()
		s.cancel()
		return fmt.Errorf("timers: %w", err)
	}
	if err := s.load(ctx); err != nil {
		subs.Close()
		s.cancel()
		return err
	}
	s.wg.Add(1)
	go s.loop()
	return nil
}

// Close stops the scheduler and waits for deliveries under way.
func (s *Scheduler) Close() {
	if s.cancel == nil {
		return
	}
	s.subs.Close()
	s.cancel()
	s.wg.Wait()
}

// load reads the scheduled timers, after waiting (briefly) for persistence
// to apply the SYSTEM stream as it is now.
func (s *Scheduler) load(ctx context.Context) error {
	stream, err := s.js.Stream(ctx, bus.StreamSystem)
	if err == nil {
		var info *jetstream.StreamInfo
		if info, err = stream.Info(ctx); err == nil && info.State.LastSeq > 0 {
			wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			err = rpc.WaitApplied(wctx, s.nc, bus.StreamSystem, info.State.LastSeq)
			cancel()
		}
	}
	if err != nil {
		s.log.Warn().Err(err).Msg("persistence did not confirm the SYSTEM stream is applied; reading timers as stored")
	}
	ts, err := loadScheduled(ctx, s.db)
	if err != nil {
		return err
	}
	for _, t := range ts {
		s.apply(t)
	}
	s.log.Info().Int("scheduled", len(ts)).Msg("timers loaded")
	return nil
}

// apply takes a timer's state: a scheduled one is kept until it ends; an
// ended one is never scheduled again.
func (s *Scheduler) apply(t *protocol.Timer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch t.Status {
	case protocol.TimerStatusScheduled:
		if _, ended := s.ended[t.ID]; ended {
			return
		}
		if _, ok := s.pending[t.ID]; ok {
			return
		}
		s.pending[t.ID] = t
	default:
		delete(s.pending, t.ID)
		delete(s.retryAt, t.ID)
		s.ended[t.ID] = s.now()
		if len(s.ended) > 100000 {
			s.forgetEnded()
		}
	}
	s.changed()
}

// resyncMargin: a timer set this recently may not be stored yet, so a
// resync that does not find it keeps it.
const resyncMargin = 10 * time.Second

// resync takes the scheduled timers as stored (read from started on): new
// ones are added, and ones no longer scheduled there (their fired or
// cancelled state was missed live) end here.
func (s *Scheduler) resync(ts []*protocol.Timer, started time.Time) {
	stored := make(map[string]bool, len(ts))
	for _, t := range ts {
		stored[t.ID] = true
		s.apply(t)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cut := started.Add(-resyncMargin).UnixMilli()
	for id, t := range s.pending {
		if !stored[id] && !s.busy[id] && t.Timestamp < cut {
			delete(s.pending, id)
			delete(s.retryAt, id)
			s.ended[id] = s.now()
		}
	}
	s.changed()
}

// forgetEnded drops the ended ids older than a day (a replay of their
// scheduled state is older still and persistence keeps them ended).
func (s *Scheduler) forgetEnded() {
	cut := s.now().Add(-24 * time.Hour)
	for id, at := range s.ended {
		if at.Before(cut) {
			delete(s.ended, id)
		}
	}
}

// changed wakes the loop; s.mu is held.
func (s *Scheduler) changed() {
	if s.hooks.Scheduled != nil {
		s.hooks.Scheduled(len(s.pending))
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// loop delivers due timers, sleeping until the next one is due.
func (s *Scheduler) loop() {
	defer s.wg.Done()
	resync := time.NewTicker(s.cfg.Resync)
	defer resync.Stop()
	for {
		due, next := s.due()
		for _, t := range due {
			s.wg.Add(1)
			go func() { defer s.wg.Done(); s.deliver(t) }()
		}
		wait := time.Hour
		if !next.IsZero() {
			wait = max(next.Sub(s.now()), time.Millisecond)
		}
		tm := time.NewTimer(wait)
		select {
		case <-s.ctx.Done():
			tm.Stop()
			return
		case <-s.wake:
		case <-tm.C:
		case <-resync.C:
			started := s.now()
			if ts, err := loadScheduled(s.ctx, s.db); err != nil {
				s.log.Warn().Err(err).Msg("timers: resync")
			} else {
				s.resync(ts, started)
			}
		}
		tm.Stop()
	}
}

// due returns the timers to deliver now (marked busy) and when the next
// one not due yet is.
func (s *Scheduler) due() ([]*protocol.Timer, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var out []*protocol.Timer
	var next time.Time
	for id, t := range s.pending {
		if s.busy[id] {
			continue
		}
		at := time.UnixMilli(t.DueAt)
		if r, ok := s.retryAt[id]; ok && r.After(at) {
			at = r
		}
		if !at.After(now) {
			s.busy[id] = true
			out = append(out, t)
			continue
		}
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return out, next
}

// retryLater makes id due again at at (unless it ends before).
func (s *Scheduler) retryLater(id string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.busy, id)
	if _, ok := s.pending[id]; ok {
		s.retryAt[id] = at
	}
	s.changed()
}

// done ends id here once delivered (the fired envelope is also heard).
func (s *Scheduler) done(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.busy, id)
	delete(s.pending, id)
	delete(s.retryAt, id)
	s.ended[id] = s.now()
	s.changed()
}

// Scheduled returns a person's scheduled timers, soonest first.
func (s *Scheduler) Scheduled(userID string) []*protocol.Timer {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*protocol.Timer
	for _, t := range s.pending {
		if t.UserID == userID {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b *protocol.Timer) int {
		if a.DueAt != b.DueAt {
			return int(a.DueAt - b.DueAt)
		}
		return compareStrings(a.ID, b.ID)
	})
	return out
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Location is the person's time zone: alicia_user_settings.time_zone, else
// the installation's (cached for a minute).
func (s *Scheduler) Location(ctx context.Context, userID string) *time.Location {
	if userID == "" {
		return s.defLoc
	}
	s.zmu.Lock()
	e, ok := s.zones[userID]
	s.zmu.Unlock()
	if ok && s.now().Sub(e.at) < time.Minute {
		return e.loc
	}
	loc := s.defLoc
	person, err := prefs.ReadPerson(ctx, s.db, userID)
	switch {
	case err != nil:
		s.log.Warn().Err(err).Msg("time zone of the person not read; using the installation's")
		return loc
	case person.TimeZone != nil && *person.TimeZone != "":
		if l, err := time.LoadLocation(*person.TimeZone); err == nil {
			loc = l
		}
	}
	s.zmu.Lock()
	if len(s.zones) > 10000 {
		clear(s.zones)
	}
	s.zones[userID] = zoneEntry{loc: loc, at: s.now()}
	s.zmu.Unlock()
	return loc
}
