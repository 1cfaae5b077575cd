package prefs

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
)

// DefaultTTL is how long a Cache keeps what it read of a conversation
// before reading it again: a bound on how stale a value can be when an
// envelope was missed (core NATS does not redeliver).
const DefaultTTL = time.Minute

// missingTTL: a conversation not stored yet is looked up again this soon.
const missingTTL = 2 * time.Second

// metaUserID is the envelope meta naming the acting person (edge.MetaUserID,
// not imported: the edges may come to use this package).
const metaUserID = "alicia.user_id"

// Cache resolves conversations' preferences for a service that applies
// them on every sentence or utterance: each conversation is read from
// Postgres at most once per TTL, and the Configuration and UserSettings
// envelopes heard live (Route) apply at once, over what was read, even
// before persistence stored them. Safe for concurrent use.
//
//	c := prefs.NewCache(pool, defaults)
//	c.Route(routes) // before routes.Subscribe
//	eff, err := c.Get(ctx, conversationID)
type Cache struct {
	q   Querier // nil: nothing stored is read (live envelopes and defaults only)
	d   Defaults
	ttl time.Duration
	now func() time.Time

	mu        sync.Mutex
	convs     map[string]readEntry
	live      map[string]liveConv
	people    map[string]livePerson
	lastSweep time.Time
}

type readEntry struct {
	st      Stored
	at      time.Time
	missing bool
}

type liveConv struct {
	l     Layer
	owner string // the person who sent it (meta alicia.user_id), for a conversation not read
	at    time.Time
}

type livePerson struct {
	l  Layer
	ts int64 // UserSettings.timestamp
	at time.Time
}

// Option adjusts a Cache.
type Option func(*Cache)

// WithTTL sets how long a read is kept (DefaultTTL).
func WithTTL(d time.Duration) Option { return func(c *Cache) { c.ttl = d } }

// NewCache returns a cache reading with q (nil: no Postgres, only the
// envelopes heard and d) and falling back to d.
func NewCache(q Querier, d Defaults, opts ...Option) *Cache {
	c := &Cache{q: q, d: d, ttl: DefaultTTL, now: time.Now,
		convs: map[string]readEntry{}, live: map[string]liveConv{}, people: map[string]livePerson{}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Defaults returns the installation's values the cache falls back to.
func (c *Cache) Defaults() Defaults { return c.d }

// Get returns the values that apply to conversationID now. On a failed
// read it still returns what it knows (live envelopes over the defaults)
// with the error; a conversation not stored yet is not an error.
func (c *Cache) Get(ctx context.Context, conversationID string) (Effective, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.convs[conversationID]
	c.mu.Unlock()
	var err error
	if c.q != nil && (!ok || now.Sub(e.at) >= c.ttl || (e.missing && now.Sub(e.at) >= missingTTL)) {
		st, rerr := Read(ctx, c.q, conversationID)
		switch {
		case rerr == nil:
			e = readEntry{st: st, at: now}
		case errors.Is(rerr, ErrNoConversation):
			e = readEntry{at: now, missing: true}
		default:
			err = rerr
		}
		if err == nil {
			c.mu.Lock()
			c.convs[conversationID] = e
			c.mu.Unlock()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sweep(now)
	st := e.st
	live, heard := c.live[conversationID]
	if st.UserID == "" && heard {
		st.UserID = live.owner // not stored yet, or no Postgres: its Configuration's sender
	}
	if p, ok := c.people[st.UserID]; ok && st.UserID != "" {
		st.Person = p.l // a UserSettings holds whole
	}
	if heard {
		st.Conversation = st.Conversation.merge(live.l)
	}
	return st.Apply(c.d), err
}

// Forget drops what the cache read of conversationID (a deleted
// conversation, a test).
func (c *Cache) Forget(conversationID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.convs, conversationID)
	delete(c.live, conversationID)
}

// Route adds to rt the subscriptions that keep the cache live: every
// conversation's client Configuration and every UserSettings
// (alicia.sys.user_settings). The service's NATS user needs subscribe
// permission on both (pkg/natsauth).
func (c *Cache) Route(rt *bus.Routes) {
	limits := bus.PendingLimits(1<<16, 64<<20)
	bus.On(rt, "prefs_configuration", subjects.AllOfType(subjects.OriginClient, protocol.TypeConfiguration), c.onConfiguration, limits, bus.ConversationSubject())
	bus.On(rt, "prefs_user_settings", subjects.System(protocol.TypeUserSettings), c.onUserSettings, limits)
}

func (c *Cache) onConfiguration(_ context.Context, env protocol.Envelope, b *protocol.Configuration, in bus.Inbound) error {
	l := Layer{Voice: b.Voice, SpeechSpeed: b.SpeechSpeed, Language: b.PreferredLanguage, WakeWord: b.WakeWord}
	if l == (Layer{}) {
		return nil // features, versions: nothing of ours
	}
	by, _ := env.Meta[metaUserID].(string)
	c.Heard(in.Conversation, by, l)
	return nil
}

// Heard applies a conversation's Configuration values at once (Route calls
// it for the envelopes it hears); owner is the person who sent it ("" when
// unknown), whose settings apply to a conversation not read from Postgres.
func (c *Cache) Heard(conversationID, owner string, l Layer) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	prev := c.live[conversationID]
	if owner == "" {
		owner = prev.owner
	}
	c.live[conversationID] = liveConv{l: prev.l.merge(l), owner: owner, at: now}
	c.sweep(now)
}

func (c *Cache) onUserSettings(_ context.Context, env protocol.Envelope, b *protocol.UserSettings, _ bus.Inbound) error {
	if by, _ := env.Meta[metaUserID].(string); b.UserID == "" || by != b.UserID {
		return errors.New("prefs: UserSettings not set by the person themselves (persistence refuses it too)")
	}
	c.HeardPerson(b)
	return nil
}

// HeardPerson applies a person's UserSettings at once, unless a newer one
// was heard.
func (c *Cache) HeardPerson(b *protocol.UserSettings) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.people[b.UserID]; ok && prev.ts > b.Timestamp {
		return
	}
	c.people[b.UserID] = livePerson{l: Layer{Voice: b.Voice, SpeechSpeed: b.SpeechSpeed, Language: b.Language,
		TimeZone: b.TimeZone, WakeWord: b.WakeWord}, ts: b.Timestamp, at: now}
	c.sweep(now)
}

// sweep drops reads past their TTL, and envelopes heard more than two TTLs
// ago: by then every read made after persistence applied them holds them
// (a read made just before may live one TTL more). c.mu is held.
func (c *Cache) sweep(now time.Time) {
	if now.Sub(c.lastSweep) < c.ttl {
		return
	}
	c.lastSweep = now
	for k, e := range c.convs {
		if now.Sub(e.at) >= c.ttl {
			delete(c.convs, k)
		}
	}
	for k, l := range c.live {
		if now.Sub(l.at) >= 2*c.ttl {
			delete(c.live, k)
		}
	}
	for k, p := range c.people {
		if now.Sub(p.at) >= 2*c.ttl {
			delete(c.people, k)
		}
	}
}
