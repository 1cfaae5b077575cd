package chatcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/cli/internal/api"
)

// How the connection is kept honest: a ping every pingEvery must be answered
// within pingTimeout, else the connection counts as dropped.
const (
	pingEvery    = 15 * time.Second
	pingTimeout  = 10 * time.Second
	writeTimeout = 10 * time.Second
)

// conn is one WebSocket connection to the gateway. A goroutine reads frames
// into frames and reports why reading stopped on done (once).
type conn struct {
	ws     *websocket.Conn
	frames chan []byte
	done   chan error
	cancel context.CancelFunc
}

// permanentError is a dial failure that retrying will not fix (bad key,
// unknown route): the chat ends instead of reconnecting.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// dial opens /v1/ws on the gateway of client. The key travels in the
// upgrade's Authorization header, never in the URL (proxies log URLs), and
// errors never contain it.
func dial(ctx context.Context, client *api.Client) (*conn, error) {
	base, key := client.Base(), client.Key()
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	ws, resp, err := websocket.Dial(dctx, api.WebSocketEndpoint(base), &websocket.DialOptions{HTTPHeader: client.Header()})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			body, _ := io.ReadAll(resp.Body)
			apiErr := api.ErrorFromBody(http.MethodGet, "/v1/ws", resp.StatusCode, body)
			if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
				return nil, apiErr
			}
			return nil, permanentError{apiErr}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is said once, as base
		}
		return nil, fmt.Errorf("%w at %s (is `alicia up` running?): %v", api.ErrUnreachable, base, redact(err, key))
	}
	ws.SetReadLimit(int64(protocol.MaxEnvelopeSize) + 1024)
	cctx, stop := context.WithCancel(context.Background())
	c := &conn{ws: ws, frames: make(chan []byte, 64), done: make(chan error, 1), cancel: stop}
	go c.read(cctx)
	go c.keepAlive(cctx)
	return c, nil
}

func (c *conn) read(ctx context.Context) {
	for {
		typ, frame, err := c.ws.Read(ctx)
		if err != nil {
			c.done <- err
			return
		}
		if typ != websocket.MessageBinary {
			continue // the protocol is binary; nothing else is meant for us
		}
		select {
		case c.frames <- frame:
		case <-ctx.Done():
			c.done <- ctx.Err()
			return
		}
	}
}

// keepAlive pings so a connection that silently died (laptop asleep, network
// gone) is noticed and replaced instead of waiting forever.
func (c *conn) keepAlive(ctx context.Context) {
	t := time.NewTicker(pingEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			pctx, cancel := context.WithTimeout(ctx, pingTimeout)
			err := c.ws.Ping(pctx)
			cancel()
			if err != nil && ctx.Err() == nil {
				_ = c.ws.CloseNow()
				return
			}
		}
	}
}

// send writes one envelope.
func (c *conn) send(ctx context.Context, env protocol.Envelope) error {
	frame, err := protocol.Encode(env)
	if err != nil {
		return fmt.Errorf("encode %s: %w", env.Type, err)
	}
	wctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	return c.ws.Write(wctx, websocket.MessageBinary, frame)
}

// close ends the connection; a clean close when bye, else immediately.
func (c *conn) close(bye bool) {
	if bye {
		_ = c.ws.Close(websocket.StatusNormalClosure, "bye")
	}
	c.cancel()
	_ = c.ws.CloseNow()
}

func redact(err error, key string) string {
	msg := err.Error()
	for _, k := range []string{key, url.QueryEscape(key)} {
		if k != "" {
			msg = strings.ReplaceAll(msg, k, "***")
		}
	}
	return msg
}
