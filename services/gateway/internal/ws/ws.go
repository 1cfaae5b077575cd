// Package ws serves /v1/ws: binary msgpack envelopes over a WebSocket, one
// conversation per connection, through the shared edge session.
package ws

import (
	"context"
	"errors"
	"time"

	"github.com/coder/websocket"
	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/gateway/internal/auth"
)

// Handler accepts WebSocket connections.
type Handler struct {
	JS        jetstream.JetStream
	Auth      edge.Authorizer
	Log       zerolog.Logger
	QueueSize int
	// OriginPatterns allowed for browsers (host patterns); same-origin always is.
	OriginPatterns []string
}

// transport writes frames as binary WebSocket messages.
type transport struct{ c *websocket.Conn }

func (t transport) Send(ctx context.Context, frame []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return t.c.Write(ctx, websocket.MessageBinary, frame)
}

// Serve is the echo handler of /v1/ws (behind auth.Middleware).
func (h *Handler) Serve(c echo.Context) error {
	conn, err := websocket.Accept(c.Response(), c.Request(), &websocket.AcceptOptions{OriginPatterns: h.OriginPatterns})
	if err != nil {
		return nil // Accept already answered the request
	}
	conn.SetReadLimit(int64(protocol.MaxEnvelopeSize) + 1024)
	user := auth.UserOf(c)
	log := h.Log.With().Str("user", user).Logger()
	s := edge.NewSession(h.JS, h.Auth, transport{conn}, edge.Options{User: user, QueueSize: h.QueueSize, Log: log})

	ctx, cancel := context.WithCancel(c.Request().Context())
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- s.Run(ctx) }()
	go func() {
		defer cancel()
		for {
			typ, frame, err := conn.Read(ctx)
			if err != nil {
				return
			}
			if typ != websocket.MessageBinary {
				s.HandleClientError(protocol.CodeMalformed, "envelopes are binary MessagePack frames")
				continue
			}
			s.HandleClient(ctx, frame)
		}
	}()
	err = <-runErr
	switch {
	case errors.Is(err, edge.ErrSlowClient):
		conn.Close(websocket.StatusTryAgainLater, "client too slow")
	case err != nil:
		log.Warn().Err(err).Msg("session ended")
		conn.Close(websocket.StatusInternalError, "session ended")
	default:
		conn.Close(websocket.StatusNormalClosure, "")
	}
	return nil
}
