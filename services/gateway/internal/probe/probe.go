// Package probe tells whether the model backends answer: GET {url}/models on
// each OpenAI-compatible endpoint, with its API key, all at once, each
// answer kept for a few seconds so a busy server-info page does not hammer
// the backends.
package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Backend is one OpenAI-compatible endpoint; an empty URL is "not configured".
type Backend struct {
	URL    string // base URL, e.g. http://vllm:8000/v1
	Model  string
	APIKey string
}

// Status is what server-info says about a backend.
type Status struct {
	Name      string `json:"name"`
	Reachable bool   `json:"reachable"`
	URL       string `json:"url,omitempty"`
	Error     string `json:"error,omitempty"`
}

// NotConfigured is the error of a backend without a URL.
const NotConfigured = "not configured"

// Options tune a Prober; zero values take the defaults.
type Options struct {
	Timeout time.Duration // per probe, default 2s
	TTL     time.Duration // how long an answer is reused, default 5s
	Client  *http.Client
}

// Prober probes a fixed set of backends by name (llm, asr, …).
type Prober struct {
	backends map[string]Backend
	opts     Options

	mu      sync.Mutex
	entries map[string]*entry
}

// entry is one probe, in flight until done is closed.
type entry struct {
	done chan struct{}
	st   Status
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

// Check returns the status of every backend, probing those whose last
// answer is older than the TTL, concurrently.
func (p *Prober) Check(ctx context.Context) map[string]Status {
	out := make(map[string]Status, len(p.backends))
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

func (p *Prober) status(ctx context.Context, name string) Status {
	b := p.backends[name]
	if b.URL == "" {
		return Status{Name: b.Model, Error: NotConfigured}
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
			return Status{Name: b.Model, URL: display(b.URL), Error: "probe abandoned: " + ctx.Err().Error()}
		}
	}
	e = &entry{done: make(chan struct{})}
	p.entries[name] = e
	p.mu.Unlock()

	// Not the request's context: a client that goes away must not leave a
	// cancelled probe in the cache.
	st := p.probe(b)
	p.mu.Lock()
	e.st, e.at = st, time.Now()
	p.mu.Unlock()
	close(e.done)
	return st
}

func (p *Prober) probe(b Backend) Status {
	st := Status{Name: b.Model, URL: display(b.URL)}
	ctx, cancel := context.WithTimeout(context.Background(), p.opts.Timeout)
	defer cancel()
	u, err := url.Parse(b.URL)
	if err != nil {
		st.Error = "bad URL: " + err.Error()
		return st
	}
	u.Path = strings.TrimRight(u.Path, "/") + "/models"
	u.RawPath = ""
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		st.Error = "bad URL: " + err.Error()
		return st
	}
	req.Header.Set("Accept", "application/json")
	if b.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+b.APIKey)
	}
	resp, err := p.opts.Client.Do(req)
	if err != nil {
		st.Error = describe(err, p.opts.Timeout)
		return st
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		st.Error = "GET /models answered " + resp.Status
		return st
	}
	st.Reachable = true
	return st
}

func describe(err error, timeout time.Duration) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no answer within %s", timeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Op + ": " + oe.Err.Error()
	}
	return err.Error()
}

// display is the URL without credentials or query, safe to show.
func display(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}
