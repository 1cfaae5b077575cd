package edge

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Usage is what one user holds and has recently sent, as the database
// (where persistence keeps it) says.
type Usage struct {
	StoredBytes int64 // the user's conversations and memories
	AudioBytes  int64 // input audio stored since the day began (UTC)
	// Created are the conversations created since the hour began, by id:
	// one created here and already stored is counted once.
	Created []Creation
}

// Creation is a conversation created at a time.
type Creation struct {
	ID string
	At time.Time
}

// UsageSource reads a user's usage: the bytes stored, input audio since
// day, and conversations created since hour.
type UsageSource interface {
	Usage(ctx context.Context, user string, day, hour time.Time) (Usage, error)
}

// Accounts enforce Budgets for the users of one edge process. The bytes
// and conversations a user holds over every replica come from the
// database (UsageSource), read again every UsageRefresh while the user is
// active, in the background: no envelope waits for a query. What this
// process took since a read is added to it, so one replica alone cannot
// overshoot, and replicas together by at most what they take between two
// reads (the per-second audio rate bounds it). Until a user's first read
// arrives, and while the database does not answer, only the per-second
// and size budgets apply (logged).
type Accounts struct {
	b   Budgets
	src UsageSource
	log zerolog.Logger
	now func() time.Time
	// MaxUsers bounds the users tracked (default 10000); idle ones are
	// forgotten first.
	MaxUsers int

	mu    sync.Mutex
	users map[string]*account
	wg    sync.WaitGroup
}

type account struct {
	read       Usage     // the last read
	readAt     time.Time // when it began (zero: none yet)
	day        time.Time // the UTC day read.AudioBytes counts from
	since      Usage     // taken by this process since the last read began
	during     Usage     // taken while a read runs (moves to since after it)
	reading    bool
	audio      bucket     // bytes per second
	created    []Creation // conversations created here in the last hour
	lastActive time.Time
}

// NewAccounts enforces b with usage from src (nil: only the per-second and
// size budgets apply, as in an edge without a database).
func NewAccounts(b Budgets, src UsageSource, log zerolog.Logger) *Accounts {
	return &Accounts{b: b.WithDefaults(), src: src, log: log, now: time.Now, MaxUsers: 10000, users: map[string]*account{}}
}

// Budgets are the budgets enforced.
func (a *Accounts) Budgets() Budgets { return a.b }

// SetClock replaces time.Now (tests).
func (a *Accounts) SetClock(now func() time.Time) { a.now = now }

// Now is the time on the accounts' clock: an OverBudget's FreeAt is on it.
func (a *Accounts) Now() time.Time { return a.now() }

// Wait waits for the reads in flight (tests, shutdown).
func (a *Accounts) Wait() { a.wg.Wait() }

func dayOf(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// get returns user's account, starting a read when it is due; under a.mu.
func (a *Accounts) get(user string, now time.Time) *account {
	acc, ok := a.users[user]
	if !ok {
		if len(a.users) >= max(1, a.MaxUsers) {
			a.forgetIdle(now)
		}
		acc = &account{}
		a.users[user] = acc
	}
	acc.lastActive = now
	if a.src != nil && !acc.reading && (acc.readAt.IsZero() || now.Sub(acc.readAt) >= a.b.UsageRefresh || !dayOf(now).Equal(acc.day)) {
		a.startRead(user, acc, now)
	}
	return acc
}

// forgetIdle drops the accounts idle for longer than a refresh; under a.mu.
func (a *Accounts) forgetIdle(now time.Time) {
	for u, acc := range a.users {
		if !acc.reading && now.Sub(acc.lastActive) > a.b.UsageRefresh {
			delete(a.users, u)
		}
	}
}

// startRead reads user's usage in the background; under a.mu.
func (a *Accounts) startRead(user string, acc *account, now time.Time) {
	acc.reading = true
	day := dayOf(now)
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		u, err := a.src.Usage(ctx, user, day, now.Add(-time.Hour))
		a.mu.Lock()
		defer a.mu.Unlock()
		acc.reading = false
		if err != nil {
			a.log.Warn().Err(err).Str("user", user).Msg("budgets: could not read the user's usage; only the per-second and size budgets apply until it can be read")
			acc.since = add(acc.since, acc.during)
			acc.during = Usage{}
			return
		}
		acc.read, acc.readAt, acc.day = u, now, day
		// What was taken before the read began is in it (persistence had
		// applied it, or nearly: a read is never older than UsageRefresh);
		// what was taken during it may not be.
		acc.since, acc.during = acc.during, Usage{}
	}()
}

func add(x, y Usage) Usage {
	return Usage{StoredBytes: x.StoredBytes + y.StoredBytes, AudioBytes: x.AudioBytes + y.AudioBytes}
}

// take records bytes stored (audio: of input audio) for acc; under a.mu.
func (acc *account) take(stored, audio int64) {
	d := Usage{StoredBytes: stored, AudioBytes: audio}
	if acc.reading {
		acc.during = add(acc.during, d)
	} else {
		acc.since = add(acc.since, d)
	}
}

// total is the read plus what this process took since; under a.mu.
func (acc *account) total() Usage { return add(add(acc.read, acc.since), acc.during) }

// Envelope checks a client envelope of `size` encoded bytes, with `audio`
// bytes of audio data (0 for other types) and whether it stores anything,
// against user's budgets, and records it when taken.
func (a *Accounts) Envelope(user string, size, audio int64, storing bool) *OverBudget {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	acc := a.get(user, now)
	tot := acc.total()
	if storing && a.b.StoredBytes > 0 && !acc.readAt.IsZero() && tot.StoredBytes+size > a.b.StoredBytes {
		if audio > 0 && a.b.AudioBytesPerSecond > 0 {
			acc.audio.charge(now, float64(a.b.AudioBytesPerSecond), float64(max(a.b.AudioBurstBytes, audio)), float64(audio))
		}
		return &OverBudget{Budget: BudgetStored, Reason: fmt.Sprintf("you store %s of %s; delete conversations or memories to free space",
			Size(tot.StoredBytes), Size(a.b.StoredBytes))}
	}
	var over *OverBudget
	if audio > 0 && a.b.AudioBytesPerDay > 0 && !acc.readAt.IsZero() && dayOf(now).Equal(acc.day) && tot.AudioBytes+audio > a.b.AudioBytesPerDay {
		over = &OverBudget{Budget: BudgetAudioDay, Reason: fmt.Sprintf("%s of audio sent today (UTC), at most %s a day",
			Size(tot.AudioBytes), Size(a.b.AudioBytesPerDay)), FreeAt: dayOf(now).Add(24 * time.Hour)}
	}
	if audio > 0 && a.b.AudioBytesPerSecond > 0 {
		// Every chunk read costs its bytes of the rate, taken or refused
		// (Pace then holds the connection's reads while the rate is in
		// debt): a client sending refused audio gets read no faster than
		// the rate.
		rate, burst := float64(a.b.AudioBytesPerSecond), float64(max(a.b.AudioBurstBytes, audio))
		fits := acc.audio.waitN(now, rate, burst, float64(audio)) == 0
		acc.audio.charge(now, rate, burst, float64(audio))
		if !fits && over == nil {
			over = &OverBudget{Budget: BudgetAudioRate, Reason: fmt.Sprintf("a chunk of %s beyond %s of audio per second per user (burst %s)",
				Size(audio), Size(a.b.AudioBytesPerSecond), Size(a.b.AudioBurstBytes)),
				FreeAt: now.Add(acc.audio.waitN(now, rate, burst, float64(audio)))}
		}
	}
	if over != nil {
		return over
	}
	if storing {
		acc.take(size, audio)
	}
	return nil
}

// Conversation checks that user may create conversation cid, and records
// it: the conversations created in the last hour are those the database
// had at the last read and those created here since, counted once each.
func (a *Accounts) Conversation(user, cid string) *OverBudget {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	acc := a.get(user, now)
	hourAgo := now.Add(-time.Hour)
	recent := acc.created[:0]
	for _, c := range acc.created {
		if c.At.After(hourAgo) {
			recent = append(recent, c)
		}
	}
	acc.created = recent
	seen := make(map[string]struct{}, len(acc.read.Created)+len(recent))
	var oldest time.Time
	for _, c := range append(slices.Clone(acc.read.Created), recent...) {
		if !c.At.After(hourAgo) {
			continue
		}
		seen[c.ID] = struct{}{}
		if oldest.IsZero() || c.At.Before(oldest) {
			oldest = c.At
		}
	}
	if a.b.ConversationsPerHour > 0 && len(seen) >= a.b.ConversationsPerHour {
		return &OverBudget{Budget: BudgetConversations, Reason: fmt.Sprintf("%d conversations created in the last hour, at most %d",
			len(seen), a.b.ConversationsPerHour), FreeAt: oldest.Add(time.Hour)}
	}
	acc.created = append(acc.created, Creation{ID: cid, At: now})
	return nil
}

// Voice reports whether user may start or keep speaking (nil), or is over
// the day's audio or the stored budget (the gateway's room tokens: voice
// audio reaches the room-agent, not the gateway's edge).
func (a *Accounts) Voice(user string) *OverBudget {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	acc := a.get(user, now)
	if acc.readAt.IsZero() {
		return nil
	}
	tot := acc.total()
	// Room for at least two seconds of speech (16 kHz PCM): less than that
	// left and the next utterance would pass the budget.
	const utterance = 64 << 10
	if a.b.StoredBytes > 0 && tot.StoredBytes+utterance > a.b.StoredBytes {
		return &OverBudget{Budget: BudgetStored, Reason: fmt.Sprintf("you store %s of %s; delete conversations or memories to free space",
			Size(tot.StoredBytes), Size(a.b.StoredBytes))}
	}
	if a.b.AudioBytesPerDay > 0 && dayOf(now).Equal(acc.day) && tot.AudioBytes+utterance > a.b.AudioBytesPerDay {
		return &OverBudget{Budget: BudgetAudioDay, Reason: fmt.Sprintf("%s of audio sent today (UTC), at most %s a day",
			Size(tot.AudioBytes), Size(a.b.AudioBytesPerDay)), FreeAt: dayOf(now).Add(24 * time.Hour)}
	}
	return nil
}

// Stored reports whether user may store more (nil) or is over its stored
// budget (the REST API's writes).
func (a *Accounts) Stored(user string, size int64) *OverBudget {
	return a.Envelope(user, size, 0, true)
}

// Warm starts reading user's usage (a connection opened), so the first
// envelopes are already judged against it.
func (a *Accounts) Warm(user string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.get(user, a.now())
}

// Len is how many users are tracked.
func (a *Accounts) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.users)
}

// waitN is how long until the bucket holds n tokens (0: now).
func (b *bucket) waitN(now time.Time, rate, burst, n float64) time.Duration {
	tokens := burst
	if !b.last.IsZero() {
		tokens = min(burst, b.tokens+now.Sub(b.last).Seconds()*rate)
	}
	if tokens >= n {
		return 0
	}
	return time.Duration((n - tokens) / rate * float64(time.Second))
}

// charge spends n tokens whether or not the bucket holds them: the debt
// (at most burst) is paid back at the rate before anything else fits.
func (b *bucket) charge(now time.Time, rate, burst, n float64) {
	if b.last.IsZero() {
		b.tokens = burst
	} else {
		b.tokens = min(burst, b.tokens+now.Sub(b.last).Seconds()*rate)
	}
	b.last = now
	b.tokens = max(-burst, b.tokens-n)
}

// AudioWait is how long user's audio rate is in debt (0: none): an edge
// that reads one frame at a time waits it out before the next read.
func (a *Accounts) AudioWait(user string) time.Duration {
	if a.b.AudioBytesPerSecond <= 0 {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	acc, ok := a.users[user]
	if !ok || acc.audio.last.IsZero() {
		return 0
	}
	rate := float64(a.b.AudioBytesPerSecond)
	tokens := acc.audio.tokens + a.now().Sub(acc.audio.last).Seconds()*rate
	if tokens >= 0 {
		return 0
	}
	return time.Duration(-tokens / rate * float64(time.Second))
}
