// Package apitest is an in-memory gateway REST API (services/gateway/API.md)
// for the CLI's tests: conversations with messages, API keys, JSON errors,
// paging, and a log of the requests it received.
package apitest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/services/cli/internal/api"
)

// Request is what the server received.
type Request struct {
	Method, Path, Query, Auth string
	Body                      map[string]any
}

// Server speaks the conversation routes of API.md for one user's key.
type Server struct {
	*httptest.Server
	Key string
	// PageSize caps a page below the requested limit (0: no cap) so tests
	// exercise the cursor.
	PageSize int

	mu       sync.Mutex
	convs    map[string]*api.ConversationDetail
	foreign  map[string]bool // conversations of another user
	requests []Request
	now      int64
}

// New starts a server on 127.0.0.1 accepting key.
func New(t testing.TB, key string) *Server {
	s := &Server{Key: key, convs: map[string]*api.ConversationDetail{}, foreign: map[string]bool{},
		now: time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC).UnixMilli()}
	s.Server = httptest.NewServer(s)
	t.Cleanup(s.Close)
	return s
}

// Add stores a conversation (its UpdatedAt orders the list).
func (s *Server) Add(c api.ConversationDetail) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.MessageCount = max(c.MessageCount, len(c.Messages))
	s.convs[c.ID] = &c
}

// AddForeign stores a conversation that belongs to another user.
func (s *Server) AddForeign(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.foreign[id] = true
}

// Conversation returns a stored conversation.
func (s *Server) Conversation(id string) (api.ConversationDetail, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.convs[id]
	if !ok {
		return api.ConversationDetail{}, false
	}
	return *c, true
}

// Requests returns what the server received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

func fail(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": status, "message": msg}})
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// ServeHTTP answers the conversation routes (so a test can mount them beside others).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Auth: r.Header.Get("Authorization")}
	if r.Body != nil && r.ContentLength != 0 {
		if err := json.NewDecoder(r.Body).Decode(&req.Body); err != nil {
			fail(w, http.StatusBadRequest, "body is not JSON")
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, req)
	if req.Auth != "Bearer "+s.Key {
		fail(w, http.StatusUnauthorized, "missing or invalid API key")
		return
	}
	id, hasID := strings.CutPrefix(r.URL.Path, "/v1/conversations/")
	switch {
	case r.URL.Path == "/v1/conversations" && r.Method == http.MethodPost:
		s.create(w, req)
	case r.URL.Path == "/v1/conversations" && r.Method == http.MethodGet:
		s.list(w, r)
	case hasID && s.foreign[id]:
		fail(w, http.StatusForbidden, "conversation belongs to another user")
	case hasID && (s.convs[id] == nil || s.convs[id].Status == "deleted"):
		fail(w, http.StatusNotFound, "conversation not found")
	case hasID && r.Method == http.MethodGet:
		reply(w, http.StatusOK, s.convs[id])
	case hasID && r.Method == http.MethodDelete:
		s.convs[id].Status = "deleted"
		w.WriteHeader(http.StatusNoContent)
	default:
		fail(w, http.StatusNotFound, "no such route")
	}
}

func (s *Server) create(w http.ResponseWriter, req Request) {
	s.now += 1000
	c := &api.ConversationDetail{Conversation: api.Conversation{ID: "ac_new" + strconv.Itoa(len(s.convs)+1), Status: "active",
		CreatedAt: s.now, UpdatedAt: s.now}, Messages: []api.Message{}}
	if t, ok := req.Body["title"].(string); ok {
		c.Title = t
	}
	s.convs[c.ID] = c
	reply(w, http.StatusCreated, c.Conversation)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	status := r.URL.Query().Get("status")
	if status == "" {
		status = "active"
	}
	if status != "active" && status != "archived" && status != "all" {
		fail(w, http.StatusBadRequest, "status must be active, archived or all")
		return
	}
	limit := 50
	if l := r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 200 {
			fail(w, http.StatusBadRequest, "limit must be 1..200")
			return
		}
		limit = n
	}
	if s.PageSize > 0 {
		limit = min(limit, s.PageSize)
	}
	var all []api.Conversation
	for _, c := range s.convs {
		if c.Status == "deleted" || (status != "all" && c.Status != status) {
			continue
		}
		all = append(all, c.Conversation)
	}
	slices.SortFunc(all, func(a, b api.Conversation) int { return int(b.UpdatedAt - a.UpdatedAt) })
	from, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
	page := map[string]any{"conversations": []api.Conversation{}}
	if from < len(all) {
		end := min(from+limit, len(all))
		page["conversations"] = all[from:end]
		if end < len(all) {
			page["nextCursor"] = strconv.Itoa(end)
		}
	}
	reply(w, http.StatusOK, page)
}
