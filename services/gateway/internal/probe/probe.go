// Package probe tells server-info whether the model engines are usable
// (engines.Probe: the server lists the configured model, espeak-ng runs with
// the voice), all at once, each answer kept for a few seconds so a busy
// server-info page or many WebSocket connections do not hammer the backends.
package probe

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/pkg/engines"
)

// Backend is one engine; a server without a URL is "not configured".
type Backend = engines.Engine

// Options tune a Prober; zero values take the defaults.
type Options struct {
	Timeout time.Duration // per probe, default 2s
	TTL     time.Duration // how long an answer is reused, default 5s
	Client  *http.Client
}

// Prober probes a fixed set of engines by name (llm, asr, …).
type Prober struct {
	backends map[string]Backend
	opts     Options

	mu      sync.Mutex
	entries map[string]*entry
}

// entry is one probe, in flight until done is closed.
type entry struct {
	done chan struct{}
	st   engines.Status
	at   time.Time
}

// New returns a prober of backends.
func New(backends map[string]Backend, opts Options) *Prober {
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Second
	}
	if opts.TTL <= 0 {
		opts.TTL = 5 * time.Second
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         (&net.Dialer{Timeout: opts.Timeout}).DialContext,
			MaxIdleConnsPerHost: 1,
			IdleConnTimeout:     30 * time.Second,
		}}
	}
	return &Prober{backends: backends, opts: opts, entries: map[string]*entry{}}
}

// Check returns the status of every engine, probing those whose last
// answer is older than the TTL, concurrently.
func (p *Prober) Check(ctx context.Context) map[string]engines.Status {
	out := make(map[string]engines.Status, len(p.backends))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name := range p.backends {
		wg.Go(func() {
			st := p.status(ctx, name)
			mu.Lock()
			out[name] = st
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

func (p *Prober) status(ctx context.Context, name string) engines.Status {
	b := p.backends[name]
	if !b.Local() && b.URL == "" {
		return engines.Probe(ctx, p.opts.Client, b, p.opts.Timeout) // not configured: nothing to ask
	}
	p.mu.Lock()
	e := p.entries[name]
	if e != nil {
		select {
		case <-e.done:
			if time.Since(e.at) >= p.opts.TTL {
				e = nil // stale: probe again
			}
		default: // in flight: share it
		}
	}
	if e != nil {
		p.mu.Unlock()
		select {
		case <-e.done:
			return e.st
		case <-ctx.Done():
			return abandoned(b, ctx.Err())
		}
	}
	e = &entry{done: make(chan struct{})}
	p.entries[name] = e
	p.mu.Unlock()

	// Not the request's context: a client that goes away must not leave a
	// cancelled probe in the cache.
	st := engines.Probe(context.Background(), p.opts.Client, b, p.opts.Timeout)
	p.mu.Lock()
	e.st, e.at = st, time.Now()
	p.mu.Unlock()
	close(e.done)
	return st
}

// abandoned is the status of a check whose caller gave up before a shared
// probe answered.
func abandoned(b Backend, err error) engines.Status {
	st := engines.Describe(b)
	st.Error = "probe abandoned: " + err.Error()
	return st
}
