package auth

import (
	"math"
	"net/netip"
	"sync"
	"time"
)

// FailureLimiter is a token bucket per client address that failed
// authentications draw from: Burst failures at once, then one every
// 1/Rate seconds. Addresses that have not failed are not tracked, and at
// most MaxAddresses are: when full, idle addresses (bucket refilled) are
// forgotten first, then the one that failed longest ago.
type FailureLimiter struct {
	rate   float64 // tokens per second
	burst  float64
	max    int
	now    func() time.Time
	mu     sync.Mutex
	bucket map[string]*failBucket
}

type failBucket struct {
	tokens float64
	at     time.Time // of the last refill
	last   time.Time // of the last failure
}

// NewFailureLimiter allows burst failures per address, refilled at perMinute
// a minute, tracking at most maxAddresses addresses.
func NewFailureLimiter(perMinute, burst, maxAddresses int) *FailureLimiter {
	return &FailureLimiter{rate: float64(perMinute) / 60, burst: float64(burst), max: maxAddresses,
		now: time.Now, bucket: map[string]*failBucket{}}
}

// SetClock replaces time.Now (tests).
func (l *FailureLimiter) SetClock(now func() time.Time) { l.now = now }

// clientKey groups an address: IPv4 as is, IPv6 by its /64 (one host
// usually holds a whole /64).
func clientKey(addr string) string {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// refill brings b up to now; the caller holds mu.
func (l *FailureLimiter) refill(b *failBucket, now time.Time) {
	b.tokens = math.Min(l.burst, b.tokens+now.Sub(b.at).Seconds()*l.rate)
	b.at = now
}

// Blocked reports whether addr may try to authenticate (true), or how many
// seconds it should wait (at least 1).
func (l *FailureLimiter) Blocked(addr string) (retryAfter int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, found := l.bucket[clientKey(addr)]
	if !found {
		return 0, true
	}
	l.refill(b, l.now())
	if b.tokens >= 1 {
		return 0, true
	}
	return max(1, int(math.Ceil((1-b.tokens)/l.rate))), false
}

// Fail takes a token from addr's bucket.
func (l *FailureLimiter) Fail(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now, key := l.now(), clientKey(addr)
	b, found := l.bucket[key]
	if !found {
		if len(l.bucket) >= l.max {
			l.evict(now)
		}
		b = &failBucket{tokens: l.burst, at: now}
		l.bucket[key] = b
	}
	l.refill(b, now)
	b.tokens = math.Max(0, b.tokens-1)
	b.last = now
}

// evict forgets idle addresses, or else the one that failed longest ago.
func (l *FailureLimiter) evict(now time.Time) {
	var oldest string
	var oldestAt time.Time
	for k, b := range l.bucket {
		l.refill(b, now)
		if b.tokens >= l.burst {
			delete(l.bucket, k)
			continue
		}
		if oldest == "" || b.last.Before(oldestAt) {
			oldest, oldestAt = k, b.last
		}
	}
	if len(l.bucket) >= l.max && oldest != "" {
		delete(l.bucket, oldest)
	}
}

// Len is the number of addresses tracked.
func (l *FailureLimiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.bucket)
}
