package edge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/alicia-voice/alicia/pkg/config"
)

// ErrFlooding ends a session whose client kept sending beyond its rate.
var ErrFlooding = errors.New("edge: client kept sending beyond its envelope rate")

// Limits bound what one client may send through an edge. The zero value
// of a field means its default (DefaultLimits).
type Limits struct {
	// PerSession and PerUser are envelopes per second and their bursts
	// (ALICIA_EDGE_RATE, default 20/s, ALICIA_EDGE_BURST, default 40;
	// ALICIA_EDGE_USER_RATE, default 50/s, ALICIA_EDGE_USER_BURST,
	// default 100: all the sessions of a user in one process share it).
	SessionRate, SessionBurst float64
	UserRate, UserBurst       float64
	// FloodLimit is how many envelopes in a row may be refused for the
	// rate before the client is disconnected (ALICIA_EDGE_FLOOD_LIMIT, default 50).
	FloodLimit int
	// MetaKeys are the meta keys a client may set
	// (ALICIA_CLIENT_META_KEYS, comma-separated); MetaMaxKeys and
	// MetaMaxBytes bound how many and the size of each value, MessagePack
	// encoded (ALICIA_CLIENT_META_MAX_KEYS, default 8;
	// ALICIA_CLIENT_META_MAX_BYTES, default 256). An envelope beyond is
	// refused with 103 naming the key.
	MetaKeys     []string
	MetaMaxKeys  int
	MetaMaxBytes int
}

// DefaultMetaKeys are the meta keys clients send: the trace context and
// what a client says about itself.
var DefaultMetaKeys = []string{"timestamp", "clientVersion", "client", "platform", "source", "locale",
	"messaging.trace_id", "messaging.span_id"}

// DefaultLimits are the limits of a production voice assistant: a person
// types or speaks a few envelopes a second, a burst covers a reconnect's
// resend and a SyncRequest's neighbours.
func DefaultLimits() Limits {
	return Limits{SessionRate: 20, SessionBurst: 40, UserRate: 50, UserBurst: 100, FloodLimit: 50,
		MetaKeys: slices.Clone(DefaultMetaKeys), MetaMaxKeys: 8, MetaMaxBytes: 256}
}

// From overrides l from the ALICIA_EDGE_* and ALICIA_CLIENT_META_* variables of src.
func (l *Limits) From(src config.Source) error {
	var keys string
	src.String("ALICIA_CLIENT_META_KEYS", &keys)
	if keys != "" {
		l.MetaKeys = nil
		for k := range strings.SplitSeq(keys, ",") {
			if k = strings.TrimSpace(k); k != "" {
				l.MetaKeys = append(l.MetaKeys, k)
			}
		}
	}
	return errors.Join(
		src.Float64("ALICIA_EDGE_RATE", &l.SessionRate),
		src.Float64("ALICIA_EDGE_BURST", &l.SessionBurst),
		src.Float64("ALICIA_EDGE_USER_RATE", &l.UserRate),
		src.Float64("ALICIA_EDGE_USER_BURST", &l.UserBurst),
		src.Int("ALICIA_EDGE_FLOOD_LIMIT", &l.FloodLimit),
		src.Int("ALICIA_CLIENT_META_MAX_KEYS", &l.MetaMaxKeys),
		src.Int("ALICIA_CLIENT_META_MAX_BYTES", &l.MetaMaxBytes),
	)
}

// Validate reports limits that would refuse everything.
func (l Limits) Validate() error {
	var errs []error
	if l.SessionRate <= 0 || l.SessionBurst < 1 || l.UserRate <= 0 || l.UserBurst < 1 {
		errs = append(errs, fmt.Errorf("ALICIA_EDGE_RATE/BURST/USER_RATE/USER_BURST (%g/%g/%g/%g): want rates > 0 and bursts ≥ 1",
			l.SessionRate, l.SessionBurst, l.UserRate, l.UserBurst))
	}
	if l.FloodLimit < 1 {
		errs = append(errs, fmt.Errorf("ALICIA_EDGE_FLOOD_LIMIT %d: want ≥ 1", l.FloodLimit))
	}
	if l.MetaMaxKeys < 0 || l.MetaMaxBytes < 1 {
		errs = append(errs, fmt.Errorf("ALICIA_CLIENT_META_MAX_KEYS %d / _MAX_BYTES %d: want ≥ 0 and ≥ 1", l.MetaMaxKeys, l.MetaMaxBytes))
	}
	return errors.Join(errs...)
}

// withDefaults fills the zero fields.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.SessionRate <= 0 {
		l.SessionRate, l.SessionBurst = d.SessionRate, max(l.SessionBurst, d.SessionBurst)
	}
	if l.SessionBurst < 1 {
		l.SessionBurst = max(1, l.SessionRate)
	}
	if l.UserRate <= 0 {
		l.UserRate, l.UserBurst = d.UserRate, max(l.UserBurst, d.UserBurst)
	}
	if l.UserBurst < 1 {
		l.UserBurst = max(1, l.UserRate)
	}
	if l.FloodLimit <= 0 {
		l.FloodLimit = d.FloodLimit
	}
	if l.MetaKeys == nil {
		l.MetaKeys = d.MetaKeys
	}
	if l.MetaMaxKeys <= 0 {
		l.MetaMaxKeys = d.MetaMaxKeys
	}
	if l.MetaMaxBytes <= 0 {
		l.MetaMaxBytes = d.MetaMaxBytes
	}
	return l
}

// checkMeta says why a client's meta is refused, or "" when it is taken.
// alicia.* keys are not counted: they are dropped (set by the edge).
func (l Limits) checkMeta(meta map[string]any) string {
	n := 0
	for k, v := range meta {
		if strings.HasPrefix(k, metaReserved) {
			continue
		}
		if !slices.Contains(l.MetaKeys, k) {
			return fmt.Sprintf("meta key %q is not allowed (allowed: %s)", k, strings.Join(l.MetaKeys, ", "))
		}
		if b, err := msgpack.Marshal(v); err != nil || len(b) > l.MetaMaxBytes {
			return fmt.Sprintf("meta key %q: value larger than %d bytes", k, l.MetaMaxBytes)
		}
		n++
	}
	if n > l.MetaMaxKeys {
		return fmt.Sprintf("meta has %d keys, at most %d allowed", n, l.MetaMaxKeys)
	}
	return ""
}

// bucket is a token bucket.
type bucket struct {
	tokens float64
	last   time.Time
}

func (b *bucket) take(now time.Time, rate, burst float64) bool {
	if b.last.IsZero() {
		b.tokens = burst
	} else {
		b.tokens = min(burst, b.tokens+now.Sub(b.last).Seconds()*rate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// full reports whether the bucket has refilled (its user is idle).
func (b *bucket) full(now time.Time, rate, burst float64) bool {
	return b.tokens+now.Sub(b.last).Seconds()*rate >= burst
}

// UserRates is the per-user envelope rate shared by every session of a
// user in the process. It tracks at most MaxUsers users: when full, the
// idle ones (bucket refilled) are forgotten, and if none is, a new user is
// bound only by its sessions' own rates.
type UserRates struct {
	MaxUsers int // default 10000
	now      func() time.Time
	mu       sync.Mutex
	buckets  map[string]*bucket
}

// NewUserRates returns an empty registry.
func NewUserRates() *UserRates {
	return &UserRates{MaxUsers: 10000, now: time.Now, buckets: map[string]*bucket{}}
}

// take spends one envelope of user's rate.
func (u *UserRates) take(user string, rate, burst float64) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.now()
	b, ok := u.buckets[user]
	if !ok {
		if len(u.buckets) >= max(1, u.MaxUsers) {
			for k, v := range u.buckets {
				if v.full(now, rate, burst) {
					delete(u.buckets, k)
				}
			}
			if len(u.buckets) >= max(1, u.MaxUsers) {
				return true
			}
		}
		b = &bucket{}
		u.buckets[user] = b
	}
	return b.take(now, rate, burst)
}

// Len is how many users are tracked.
func (u *UserRates) Len() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.buckets)
}

// admit spends one envelope of the session's and the user's rates; it
// says which limit refused it, or "".
func (s *Session) admit() string {
	l := s.limits
	s.mu.Lock()
	ok := s.rate.take(time.Now(), l.SessionRate, l.SessionBurst)
	s.mu.Unlock()
	if !ok {
		return fmt.Sprintf("too many envelopes: at most %g per second per connection (burst %g); slow down", l.SessionRate, l.SessionBurst)
	}
	if s.opts.Users != nil && !s.opts.Users.take(s.opts.User, l.UserRate, l.UserBurst) {
		return fmt.Sprintf("too many envelopes: at most %g per second per user over all connections (burst %g); slow down", l.UserRate, l.UserBurst)
	}
	s.mu.Lock()
	s.refused = 0
	s.mu.Unlock()
	return ""
}

// wait is how long until the bucket has an envelope to spare (0: now).
func (b *bucket) wait(now time.Time, rate, burst float64) time.Duration {
	tokens := burst
	if !b.last.IsZero() {
		tokens = min(burst, b.tokens+now.Sub(b.last).Seconds()*rate)
	}
	if tokens >= 1 || rate <= 0 {
		return 0
	}
	return time.Duration((1 - tokens) / rate * float64(time.Second))
}

// wait is how long until user's rate has an envelope to spare.
func (u *UserRates) wait(user string, rate, burst float64) time.Duration {
	u.mu.Lock()
	defer u.mu.Unlock()
	b, ok := u.buckets[user]
	if !ok {
		return 0
	}
	return b.wait(u.now(), rate, burst)
}

// Pace waits until the session's and its user's rates have an envelope to
// spare, without spending it. A transport that reads one frame at a time
// calls it before each read, so a flood stays in the client's socket: TCP
// flow control then slows the sender, and none of the flood costs the
// server a read, a decode or an answer. A connection that sent audio also
// waits while the user's audio rate is in debt (Accounts.AudioWait: audio
// read beyond it, taken or refused), so refused audio is read no faster
// than the rate; the user's other connections (typing, stopping an
// answer) are not held by it.
// HandleClient still checks the rates (a transport that cannot pace, like
// the data channel, refuses).
func (s *Session) Pace(ctx context.Context) error {
	l := s.limits
	for {
		s.mu.Lock()
		d := s.rate.wait(time.Now(), l.SessionRate, l.SessionBurst)
		s.mu.Unlock()
		if s.opts.Users != nil {
			d = max(d, s.opts.Users.wait(s.opts.User, l.UserRate, l.UserBurst))
		}
		if s.opts.Accounts != nil && s.sentAudio.Load() {
			d = max(d, s.opts.Accounts.AudioWait(s.opts.User))
		}
		if d <= 0 {
			return nil
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
