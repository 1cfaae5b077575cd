// Package api is the CLI's client of the gateway's REST API (services/gateway/API.md)
// and the place where the gateway's address and key are resolved.
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultAddr is where `alicia up` serves HTTP unless ALICIA_HTTP_ADDR says otherwise.
const DefaultAddr = "127.0.0.1:8080"

// BaseURL turns what the user gave (--url, ALICIA_HTTP_ADDR: "host:port",
// "http://host:port" or "https://host") into the gateway's base URL. A
// listening address such as ":8080" or "0.0.0.0:8080" is reached on 127.0.0.1.
func BaseURL(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		raw = DefaultAddr
	}
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("gateway address %q: %w", raw, err)
	}
	switch u.Scheme {
	case "http", "https":
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	default:
		return "", fmt.Errorf("gateway address %q: scheme must be http or https", raw)
	}
	if u.Host == "" {
		return "", fmt.Errorf("gateway address %q: no host", raw)
	}
	if host, port, err := net.SplitHostPort(u.Host); err == nil && (host == "" || host == "0.0.0.0" || host == "::") {
		u.Host = net.JoinHostPort("127.0.0.1", port)
	}
	u.Path, u.RawQuery, u.Fragment = strings.TrimRight(u.Path, "/"), "", ""
	return u.String(), nil
}

// WebSocketEndpoint is the /v1/ws address for base (http→ws, https→wss).
// It never holds the key: that travels in the upgrade's Authorization header
// (Client.Header), because reverse proxies write URLs to their access logs.
func WebSocketEndpoint(base string) string {
	return "ws" + strings.TrimPrefix(base, "http") + "/v1/ws"
}

// Client calls the gateway with an API key.
type Client struct {
	base string
	key  string
	http *http.Client
}

// New returns a client of the gateway at base (see BaseURL) using key.
func New(base, key string) (*Client, error) {
	if key == "" {
		return nil, ErrNoKey
	}
	return &Client{base: base, key: key, http: &http.Client{Timeout: 30 * time.Second}}, nil
}

// Base is the gateway's base URL.
func (c *Client) Base() string { return c.base }

// Key is the API key.
func (c *Client) Key() string { return c.key }

// Header is what every request to the gateway carries, REST calls and the
// WebSocket upgrade alike: the key as "Authorization: Bearer", never in a
// URL.
func (c *Client) Header() http.Header {
	return http.Header{
		"Authorization": []string{"Bearer " + c.key},
		"User-Agent":    []string{"alicia-cli"},
	}
}

// do sends a request with body (JSON when not nil) and decodes a JSON answer
// into out (when not nil). An error status becomes an *Error.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	target := c.base + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return err
	}
	req.Header = c.Header()
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("%w at %s (is `alicia up` running?): %v", ErrUnreachable, c.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		return ErrorFromBody(method, path, resp.StatusCode, data)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: unexpected answer: %w", method, path, err)
	}
	return nil
}

// ErrorFromBody reads the API's {"error": {"code", "message"}}, or falls back to
// the first line of whatever the body holds.
func ErrorFromBody(method, path string, status int, data []byte) *Error {
	e := &Error{Method: method, Path: path, Status: status, Code: status}
	var body struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &body) == nil && body.Error.Message != "" {
		e.Message = body.Error.Message
		if body.Error.Code != 0 {
			e.Code = body.Error.Code
		}
		return e
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(data)), "\n")
	if len(line) > 200 {
		line = line[:200] + "…"
	}
	e.Message = line
	return e
}

// ListOptions filter GET /v1/conversations.
type ListOptions struct {
	Status string // active (default), archived or all
	Limit  int    // page size 1..200; 0 leaves the server's default
	Cursor string
}

// ListConversations fetches one page of the user's conversations, newest first.
func (c *Client) ListConversations(ctx context.Context, o ListOptions) (Page, error) {
	q := url.Values{}
	if o.Status != "" {
		q.Set("status", o.Status)
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	var raw struct {
		Conversations []json.RawMessage `json:"conversations"`
		NextCursor    string            `json:"nextCursor"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/conversations", q, nil, &raw); err != nil {
		return Page{}, err
	}
	p := Page{Raw: raw.Conversations, NextCursor: raw.NextCursor}
	for _, r := range raw.Conversations {
		var conv Conversation
		if err := json.Unmarshal(r, &conv); err != nil {
			return Page{}, fmt.Errorf("GET /v1/conversations: unexpected conversation %s: %w", r, err)
		}
		p.Conversations = append(p.Conversations, conv)
	}
	return p, nil
}

// GetConversation fetches a conversation with the messages of its current
// branch; raw is the answer as the gateway sent it.
func (c *Client) GetConversation(ctx context.Context, id string) (conv ConversationDetail, raw json.RawMessage, err error) {
	if err := c.do(ctx, http.MethodGet, "/v1/conversations/"+url.PathEscape(id), nil, nil, &raw); err != nil {
		return ConversationDetail{}, nil, err
	}
	if err := json.Unmarshal(raw, &conv); err != nil {
		return ConversationDetail{}, nil, fmt.Errorf("GET /v1/conversations/%s: unexpected answer: %w", id, err)
	}
	return conv, raw, nil
}

// CreateConversation creates a conversation, titled when title is not empty.
func (c *Client) CreateConversation(ctx context.Context, title string) (Conversation, error) {
	body := map[string]any{}
	if title != "" {
		body["title"] = title
	}
	var conv Conversation
	err := c.do(ctx, http.MethodPost, "/v1/conversations", nil, body, &conv)
	if err == nil && conv.ID == "" {
		err = fmt.Errorf("POST /v1/conversations: the answer has no conversation id")
	}
	return conv, err
}

// DeleteConversation soft-deletes a conversation.
func (c *Client) DeleteConversation(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/conversations/"+url.PathEscape(id), nil, nil, nil)
}
