package fakeopenai

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultDims is the embedding size when neither WithDims nor the request's
// dimensions field says otherwise; it matches Alicia's memory column.
const DefaultDims = 1024

// Option configures a Handler.
type Option func(*Handler)

// WithAPIKey makes every request carry "Authorization: Bearer key".
func WithAPIKey(key string) Option { return func(h *Handler) { h.apiKey = key } }

// WithDims sets the default embedding size.
func WithDims(n int) Option { return func(h *Handler) { h.dims = n } }

// WithModels sets the ids listed by GET /v1/models.
func WithModels(ids ...string) Option { return func(h *Handler) { h.models = ids } }

// WithFallback answers requests no script takes with t, instead of ErrNoTurn.
func WithFallback(t Turn) Option {
	return func(h *Handler) { h.fallback = func(Request) Turn { return t } }
}

// WithResponder answers requests no script takes with the turn f makes
// from the request (an echo, an answer shaped by the request's format),
// instead of ErrNoTurn; it replaces WithFallback. f may be called
// concurrently.
func WithResponder(f func(Request) Turn) Option { return func(h *Handler) { h.fallback = f } }

// WithoutRecording keeps no requests: Requests, EmbeddingRequests,
// TranscriptionRequests, SpeechRequests and their counts stay empty, so a
// fake serving for hours (alicia dev fake-models) does not grow.
func WithoutRecording() Option { return func(h *Handler) { h.noRecord = true } }

// Handler serves the fake API under /v1. It is safe for concurrent use.
type Handler struct {
	mux      *http.ServeMux
	apiKey   string
	dims     int
	models   []string
	fallback func(Request) Turn
	noRecord bool
	seq      atomic.Int64
	active   atomic.Int64
	closed   chan struct{}
	close    sync.Once

	mu         sync.Mutex
	scripts    []*scriptState
	fault      Fault
	failNext   int
	failStatus int
	requests   []Request
	embeds     []EmbeddingRequest
	audio      audioState
	profile    Profile
}

// NewHandler builds a Handler; it needs no network and no testing.TB.
func NewHandler(opts ...Option) *Handler {
	h := &Handler{
		dims:   DefaultDims,
		models: []string{"fake-chat", "fake-embedding"},
		closed: make(chan struct{}),
	}
	for _, o := range opts {
		o(h)
	}
	h.mux = http.NewServeMux()
	h.mux.HandleFunc("POST /v1/chat/completions", h.chat)
	h.mux.HandleFunc("POST /v1/embeddings", h.embeddings)
	h.mux.HandleFunc("GET /v1/models", h.listModels)
	h.mountAudio()
	return h
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.active.Add(1)
	defer h.active.Add(-1)
	if h.apiKey != "" && r.Header.Get("Authorization") != "Bearer "+h.apiKey {
		writeError(w, http.StatusUnauthorized, "Incorrect API key provided.")
		return
	}
	h.mux.ServeHTTP(w, r)
}

// Active is the number of requests being served right now, held ones
// included: a test can wait for a request to be hanging before acting.
func (h *Handler) Active() int { return int(h.active.Load()) }

// Close releases requests held by a hang or a latency so a server can shut
// down; afterwards every held request has its connection dropped.
func (h *Handler) Close() { h.close.Do(func() { close(h.closed) }) }

// AddScript adds a script; see Script for the order scripts are tried in.
func (h *Handler) AddScript(s Script) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.scripts = append(h.scripts, &scriptState{Script: s})
}

// Enqueue adds turns answered in order by requests no matcher takes.
func (h *Handler) Enqueue(turns ...Turn) { h.AddScript(Script{Turns: turns}) }

// On adds turns answered, in order, to requests m matches.
func (h *Handler) On(m Matcher, turns ...Turn) { h.AddScript(Script{Match: m, Turns: turns}) }

// Pending is the number of scripted turns not yet used (repeating scripts
// count their full length).
func (h *Handler) Pending() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, s := range h.scripts {
		n += s.left()
	}
	return n
}

func (h *Handler) nextTurn(req Request) (Turn, bool) {
	if t, ok := h.scripted(req); ok {
		return t, true
	}
	if h.fallback != nil { // set by options only: no lock, and f runs unlocked
		return h.fallback(req), true
	}
	return Turn{}, false
}

// scripted takes the turn of the first script that answers req.
func (h *Handler) scripted(req Request) (Turn, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, matched := range []bool{true, false} {
		for _, s := range h.scripts {
			if (s.Match != nil) != matched || s.left() == 0 {
				continue
			}
			if s.Match == nil || s.Match(req) {
				return s.take(), true
			}
		}
	}
	return Turn{}, false
}

// record runs add, which appends a request to a log, under the lock unless
// the handler keeps no requests.
func (h *Handler) record(add func()) {
	if h.noRecord {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	add()
}

// Requests returns a copy of the chat completion requests received so far.
func (h *Handler) Requests() []Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.requests)
}

// EmbeddingRequests returns a copy of the embedding requests received so far.
func (h *Handler) EmbeddingRequests() []EmbeddingRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.embeds)
}

// Reset forgets scripts, recorded requests and faults (the speech
// configuration and the timing profile stay).
func (h *Handler) Reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.scripts, h.requests, h.embeds = nil, nil, nil
	h.fault, h.failNext, h.failStatus = Fault{}, 0, 0
	h.resetAudio()
}

// Fault is what goes wrong for every request until it is changed. The zero
// value is a healthy server. It is read once when a request arrives.
type Fault struct {
	Down       bool          // drop the connection without an answer
	Hang       bool          // answer nothing until the client gives up
	Latency    time.Duration // before the first byte
	ChunkDelay time.Duration // between streamed chunks
	Status     int           // answer with this HTTP error (500, 503, 429…)
	DropAfter  int           // cut a stream's connection after this many chunks
}

// SetFault replaces the current fault; SetFault(Fault{}) heals the server.
func (h *Handler) SetFault(f Fault) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fault = f
}

// FailNext answers the next n requests with HTTP status, then recovers.
func (h *Handler) FailNext(n, status int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failNext, h.failStatus = n, status
}

// takeFault returns the fault for one request, consuming a FailNext.
func (h *Handler) takeFault() Fault {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.fault
	if h.failNext > 0 {
		h.failNext--
		f.Status = h.failStatus
	}
	return f
}

// applyFault plays f before an answer; it reports whether the request has
// been dealt with (or abandoned) and must not be answered.
func (h *Handler) applyFault(w http.ResponseWriter, r *http.Request, f Fault) bool {
	switch {
	case f.Down:
		dropConnection(w)
		return true
	case f.Hang:
		select {
		case <-r.Context().Done():
		case <-h.closed:
			dropConnection(w)
		}
		return true
	}
	if !h.sleep(r.Context(), f.Latency) {
		dropConnection(w)
		return true
	}
	if f.Status != 0 {
		writeError(w, f.Status, http.StatusText(f.Status)+" (injected by fakeopenai)")
		return true
	}
	return false
}

// sleep waits d; false when the request or the handler ended first.
func (h *Handler) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-h.closed:
	}
	return false
}

// dropConnection closes the TCP connection without a response, as a dead
// backend or a crashed proxy would; a 503 where hijacking is impossible.
func dropConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "backend down (injected by fakeopenai)")
		return
	}
	_ = conn.Close()
}

func (h *Handler) listModels(w http.ResponseWriter, r *http.Request) {
	if h.applyFault(w, r, h.takeFault()) {
		return
	}
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, id := range h.models {
		list.Data = append(list.Data, model{ID: id, Object: "model", Created: 1700000000, OwnedBy: "fakeopenai"})
	}
	writeJSON(w, http.StatusOK, list)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers with OpenAI's error envelope.
func writeError(w http.ResponseWriter, status int, msg string) {
	typ, code := "server_error", any(nil)
	switch {
	case status == http.StatusUnauthorized:
		typ, code = "invalid_request_error", "invalid_api_key"
	case status == http.StatusTooManyRequests:
		typ, code = "requests", "rate_limit_exceeded"
	case status < 500:
		typ = "invalid_request_error"
	}
	type apiError struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Param   any    `json:"param"`
		Code    any    `json:"code"`
	}
	writeJSON(w, status, map[string]apiError{"error": {Message: msg, Type: typ, Code: code}})
}
