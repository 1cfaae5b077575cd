// Package prompts holds the versioned prompt components that shape an
// answer - system, voice_style, tool:<name>, memory_extraction,
// demonstrations - and chooses, per conversation, the version that serves
// it: a person's own active version beats the installation's, and a
// version rolling out at share s serves the conversations whose id hashes
// below s, the rest keep the version it would replace. Versions live in
// alicia_prompt_versions (written by persistence from PromptVersion
// envelopes on alicia.sys.prompt_version); the Catalog keeps the active
// ones in memory, reloaded every few seconds and updated at once from the
// envelopes heard on core NATS, so choosing costs a turn no round trip.
package prompts

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/promptver"
	"github.com/alicia-voice/alicia/pkg/protocol"
)

// Components (pkg/promptver).
const (
	System           = promptver.System
	VoiceStyle       = promptver.VoiceStyle
	MemoryExtraction = promptver.MemoryExtraction
	Demonstrations   = promptver.Demonstrations
	ToolPrefix       = promptver.ToolPrefix
)

// Version is one version of a component (as stored).
type Version = promptver.Record

// SeedID is the id of a seed version (promptver.SeedID): derived from the
// component and its text, so every replica seeding the same text names the
// same version.
func SeedID(component, text string) string { return promptver.SeedID(component, text) }

// Share is where conversation cid falls in [0, 1) (promptver.Share): a
// version rolling out at share s serves it when Share(cid) < s.
func Share(cid string) float64 { return promptver.Share(cid) }

// serving is what serves one component in one scope: the full version
// and the one rolling out beside it (either may be nil).
type serving struct{ full, rolling *Version }

type scopeKey struct{ component, user string }

// Catalog is the active versions, in memory. Its methods are safe for
// concurrent use.
type Catalog struct {
	// Load reads the active versions (store.Reader.ActivePromptVersions).
	Load func(ctx context.Context) ([]Version, error)
	// Every is how often they are reloaded; an envelope heard also
	// reloads them Settle later (persistence applied it by then).
	Every, Settle time.Duration
	Log           zerolog.Logger

	seeds map[string]string
	mu    sync.RWMutex
	snap  map[scopeKey]serving
	// applied counts the envelopes applied: a reload that began before
	// one was applied may have read the rows without it, and is dropped.
	applied uint64
	kick    chan struct{}
}

// NewCatalog returns a catalog serving seeds (component -> text) until
// versions are loaded, and for components without any.
func NewCatalog(seeds map[string]string) *Catalog {
	return &Catalog{seeds: seeds, snap: map[scopeKey]serving{}, kick: make(chan struct{}, 1), Every: 5 * time.Second, Settle: time.Second}
}

// Seeds are the built-in texts by component.
func (c *Catalog) Seeds() map[string]string { return c.seeds }

// Reload reads the active versions now.
func (c *Catalog) Reload(ctx context.Context) error {
	c.mu.RLock()
	before := c.applied
	c.mu.RUnlock()
	vs, err := c.Load(ctx)
	if err != nil {
		return err
	}
	snap := map[scopeKey]serving{}
	for i := range vs {
		place(snap, &vs[i])
	}
	c.mu.Lock()
	if c.applied == before {
		c.snap = snap
	}
	c.mu.Unlock()
	return nil
}

// place puts active version v where it serves (a later one of the same
// kind replaces an earlier one: the loader orders them by version).
func place(snap map[scopeKey]serving, v *Version) {
	k := scopeKey{v.Component, v.UserID}
	s := snap[k]
	if v.Share >= 1 {
		s.full = v
	} else {
		s.rolling = v
	}
	snap[k] = s
}

// Apply updates the catalog from a PromptVersion heard on the bus, by the
// rules persistence writes it with (migrations 00012), and asks for a
// reload once persistence has applied it.
func (c *Catalog) Apply(p *protocol.PromptVersion) {
	v := promptver.FromProtocol(p)
	c.mu.Lock()
	snap := make(map[scopeKey]serving, len(c.snap)+1)
	for k, s := range c.snap {
		if s.full != nil && s.full.ID == v.ID {
			s.full = nil
		}
		if s.rolling != nil && s.rolling.ID == v.ID {
			s.rolling = nil
		}
		if s.full != nil || s.rolling != nil {
			snap[k] = s
		}
	}
	if v.Status == protocol.PromptVersionStatusActive {
		k := scopeKey{v.Component, v.UserID}
		s := snap[k]
		if v.Share >= 1 {
			s = serving{full: &v}
		} else {
			s.rolling = &v
		}
		snap[k] = s
	}
	c.snap = snap
	c.applied++
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Run reloads the versions every Every, and Settle after an envelope was
// applied, until ctx ends.
func (c *Catalog) Run(ctx context.Context) {
	tick := time.NewTicker(c.Every)
	defer tick.Stop()
	var settle <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
			settle = time.After(c.Settle)
			continue
		case <-tick.C:
		case <-settle:
			settle = nil
		}
		if err := c.Reload(ctx); err != nil && ctx.Err() == nil {
			c.Log.Warn().Err(err).Msg("prompt versions not reloaded; the ones loaded before serve")
		}
	}
}

// Choice is the versions serving one conversation.
type Choice struct {
	c         *Catalog
	snap      map[scopeKey]serving
	cid, user string
}

// For returns the versions serving conversation cid of user (one snapshot:
// every component of a turn from the same).
func (c *Catalog) For(cid, user string) Choice {
	c.mu.RLock()
	snap := c.snap
	c.mu.RUnlock()
	return Choice{c: c, snap: snap, cid: cid, user: user}
}

// Text returns the text of component and the id of its version: the
// person's, else the installation's, else the seed's (ok false: none).
func (ch Choice) Text(component string) (text, id string, ok bool) {
	scopes := []string{""}
	if ch.user != "" {
		scopes = []string{ch.user, ""}
	}
	for _, user := range scopes {
		s := ch.snap[scopeKey{component, user}]
		if s.rolling != nil && Share(ch.cid) < s.rolling.Share {
			return s.rolling.Text, s.rolling.ID, true
		}
		if s.full != nil {
			return s.full.Text, s.full.ID, true
		}
	}
	if t, ok := ch.c.seeds[component]; ok {
		return t, SeedID(component, t), true
	}
	return "", "", false
}

// ToolText is a tool's description as served: its version's text, else
// the description the tool gave (no id).
func (ch Choice) ToolText(name, described string) (text, id string) {
	if t, id, ok := ch.Text(ToolPrefix + name); ok {
		return t, id
	}
	return described, ""
}

// Components are the names of the components with a seed, sorted.
func (c *Catalog) Components() []string {
	return slices.Sorted(maps.Keys(c.seeds))
}
