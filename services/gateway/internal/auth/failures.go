package auth

import (
	"container/list"
	"math"
	"net/netip"
	"sync"
	"time"
)

// FailureLimits bound failed authentications (ALICIA_AUTH_*).
type FailureLimits struct {
	// PerMinute and Burst: failures of one presented key from one client
	// address (ALICIA_AUTH_FAILURES_PER_MINUTE, ALICIA_AUTH_FAILURE_BURST).
	PerMinute, Burst int
	// AddressPerMinute and AddressBurst: failures of every key together from
	// one client address, the ceiling on guessing many keys
	// (ALICIA_AUTH_ADDRESS_FAILURES_PER_MINUTE, ALICIA_AUTH_ADDRESS_FAILURE_BURST).
	AddressPerMinute, AddressBurst int
	// Tracked bounds each table: (address, key) pairs, addresses, and
	// addresses whose used keys are remembered (ALICIA_AUTH_FAILURE_ADDRESSES).
	Tracked int
}

// FailureLimiter throttles guessing keys without letting anyone lock
// others out. Only a presented, wrong key is a failure (no credential at
// all, or a stale session cookie, is not), and it is counted twice, each
// a token bucket:
//
//   - per client address and presented key (its Fingerprint): a client
//     repeating a wrong key — a stale key in a script — gets 429 for that
//     key alone; the others behind the same address (a NAT) are judged as
//     before;
//   - per client address over every key, a much looser ceiling: someone
//     trying many keys. Beyond it, a wrong key gets 429, and so does a
//     valid key that was never used from the address (Admit): if a right
//     guess were let through while wrong ones get 429, the answer would
//     tell them apart and the ceiling would slow no guessing at all.
//
// A valid key already used from the address, and every valid session
// (256 random bits: not guessed), are never refused. What a web page can
// make a browser send never counts: it carries no key (a cookie is not
// sent cross-site, a header needs CORS) but in ?token=, which is read
// only on a WebSocket upgrade from an allowed Origin (Keys.presented).
//
// An address is a client address, IPv6 by its /64. Each table holds at
// most Tracked entries: idle buckets (refilled) are forgotten first, then
// the one that failed longest ago; the least recently seen address's keys.
type FailureLimiter struct {
	mu    sync.Mutex
	now   func() time.Time
	keys  buckets // by address and key fingerprint
	addrs buckets // by address
	used  usedKeys
}

// NewFailureLimiter returns a limiter with l's bounds.
func NewFailureLimiter(l FailureLimits) *FailureLimiter {
	return &FailureLimiter{now: time.Now,
		keys:  newBuckets(l.PerMinute, l.Burst, l.Tracked),
		addrs: newBuckets(l.AddressPerMinute, l.AddressBurst, l.Tracked),
		used:  usedKeys{max: l.Tracked, order: list.New(), byAddr: map[string]*list.Element{}}}
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

// Admit reports whether a valid key (its fingerprint) may act from addr
// (true), or how many seconds to wait: only while the address is over
// its ceiling, and only a key not used from it before. An admitted key is
// remembered as used from addr.
func (l *FailureLimiter) Admit(addr, fingerprint string) (retryAfter int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := clientKey(addr)
	if wait, blocked := l.addrs.wait(a, l.now()); blocked && !l.used.has(a, fingerprint) {
		return wait, false
	}
	l.used.add(a, fingerprint)
	return 0, true
}

// Remember records that a valid key (its fingerprint) acted from addr,
// through a session opened with it.
func (l *FailureLimiter) Remember(addr, fingerprint string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.used.add(clientKey(addr), fingerprint)
}

// Fail counts a wrong key (its fingerprint) presented from addr and
// reports whether it is over a budget instead (blocked, with the seconds
// to wait): then it is not counted, so waiting is enough to get a budget
// back.
func (l *FailureLimiter) Fail(addr, fingerprint string) (retryAfter int, blocked bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now, a := l.now(), clientKey(addr)
	k := a + " " + fingerprint
	wk, bk := l.keys.wait(k, now)
	wa, ba := l.addrs.wait(a, now)
	if bk || ba {
		return max(wk, wa), true
	}
	l.keys.take(k, now)
	l.addrs.take(a, now)
	return 0, false
}

// Len is the number of (address, key) pairs and of addresses tracked for
// failures.
func (l *FailureLimiter) Len() (keys, addresses int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.keys.m), len(l.addrs.m)
}

// buckets are token buckets by name, created at the first failure; the
// caller holds the limiter's mu.
type buckets struct {
	rate  float64 // tokens per second
	burst float64
	max   int
	m     map[string]*failBucket
}

type failBucket struct {
	tokens float64
	at     time.Time // of the last refill
	last   time.Time // of the last failure
}

func newBuckets(perMinute, burst, maxTracked int) buckets {
	return buckets{rate: float64(perMinute) / 60, burst: float64(burst), max: maxTracked, m: map[string]*failBucket{}}
}

// refill brings b up to now.
func (bs *buckets) refill(b *failBucket, now time.Time) {
	b.tokens = math.Min(bs.burst, b.tokens+now.Sub(b.at).Seconds()*bs.rate)
	b.at = now
}

// wait reports whether name's bucket is empty (blocked) and how many
// seconds until it holds a token (at least 1).
func (bs *buckets) wait(name string, now time.Time) (seconds int, blocked bool) {
	b, ok := bs.m[name]
	if !ok {
		return 0, false
	}
	bs.refill(b, now)
	if b.tokens >= 1 {
		return 0, false
	}
	return max(1, int(math.Ceil((1-b.tokens)/bs.rate))), true
}

// take draws a token from name's bucket.
func (bs *buckets) take(name string, now time.Time) {
	b, ok := bs.m[name]
	if !ok {
		if len(bs.m) >= bs.max {
			bs.evict(now)
		}
		b = &failBucket{tokens: bs.burst, at: now}
		bs.m[name] = b
	}
	bs.refill(b, now)
	b.tokens = math.Max(0, b.tokens-1)
	b.last = now
}

// evict forgets idle buckets, or else the one that failed longest ago.
func (bs *buckets) evict(now time.Time) {
	var oldest string
	var oldestAt time.Time
	for k, b := range bs.m {
		bs.refill(b, now)
		if b.tokens >= bs.burst {
			delete(bs.m, k)
			continue
		}
		if oldest == "" || b.last.Before(oldestAt) {
			oldest, oldestAt = k, b.last
		}
	}
	if len(bs.m) >= bs.max && oldest != "" {
		delete(bs.m, oldest)
	}
}

// usedKeys remembers which valid keys acted from which address, the
// least recently seen address forgotten first; the caller holds the
// limiter's mu. An address holds at most as many fingerprints as there
// are configured keys.
type usedKeys struct {
	max    int
	order  *list.List // of *usedAddr, most recently seen first
	byAddr map[string]*list.Element
}

type usedAddr struct {
	addr string
	fps  map[string]struct{}
}

func (u *usedKeys) has(addr, fingerprint string) bool {
	e, ok := u.byAddr[addr]
	if !ok {
		return false
	}
	_, ok = e.Value.(*usedAddr).fps[fingerprint]
	return ok
}

func (u *usedKeys) add(addr, fingerprint string) {
	if e, ok := u.byAddr[addr]; ok {
		u.order.MoveToFront(e)
		e.Value.(*usedAddr).fps[fingerprint] = struct{}{}
		return
	}
	if u.order.Len() >= u.max {
		last := u.order.Back()
		u.order.Remove(last)
		delete(u.byAddr, last.Value.(*usedAddr).addr)
	}
	u.byAddr[addr] = u.order.PushFront(&usedAddr{addr: addr, fps: map[string]struct{}{fingerprint: {}}})
}
