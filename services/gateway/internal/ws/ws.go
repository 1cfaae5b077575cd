// Package ws serves /v1/ws: binary msgpack envelopes over a WebSocket, one
// conversation per connection, through the shared edge session. The first
// frame of every connection is a ServerInfo (not stored, no stanza id).
package ws

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/gateway/internal/auth"
	"github.com/alicia-voice/alicia/services/gateway/internal/conns"
	"github.com/alicia-voice/alicia/services/gateway/internal/session"
)

// Handler accepts WebSocket connections.
type Handler struct {
	JS        jetstream.JetStream
	Auth      edge.Authorizer
	Log       zerolog.Logger
	QueueSize int
	// OriginPatterns allowed for browsers (host patterns); same-origin always is.
	OriginPatterns []string
	// PingInterval is how often an idle-looking connection is pinged; a
	// client that does not answer within it is disconnected (default 30s).
	PingInterval time.Duration
	// ServerInfo, when set, reports the server's status (the body of
	// GET /v1/server-info) as the connection's user may see it (admin: an
	// administrator), sent to each connection first.
	ServerInfo func(ctx context.Context, admin bool) (*protocol.ServerInfo, error)
	// Limits bound each connection's envelopes and meta; Users holds the
	// per-user rates shared by a user's connections (edge.Options).
	Limits edge.Limits
	Users  *edge.UserRates
	// Accounts enforce the users' budgets in bytes and work (edge.Budgets);
	// without them (every budget off) Budgets' text and size budgets apply.
	Accounts *edge.Accounts
	Budgets  edge.Budgets
	// Backlog refuses client input while the stream is too far ahead of
	// persistence (pkg/backlog; nil: never).
	Backlog edge.Backlog
	// ConnectionsPerUser bounds a user's open connections (0: no limit);
	// beyond, the upgrade is refused with 429.
	ConnectionsPerUser int
	// Sessions, when set, is asked again once a connection opened with a
	// session cookie is counted: a sign-out between the request's check
	// and then would otherwise go unheard.
	Sessions auth.SessionFinder

	conns conns.Tracker // open connections per user; ended by Shutdown and revocations
}

// Close codes of a revoked connection: the client must not reconnect
// (the web client goes to sign-in after CloseSignedOut).
const (
	CloseSignedOut           websocket.StatusCode = 4401
	CloseConversationDeleted websocket.StatusCode = 4404
)

// EndSession closes the connections opened with the session of bucket
// key key (session.KeyOf) with CloseSignedOut.
func (h *Handler) EndSession(key string) int { return h.conns.EndSession(key) }

// EndKey closes the connections of user opened with the API key of
// fingerprint (auth.Fingerprint), directly or through a session, with
// CloseSignedOut ("the API key was removed").
func (h *Handler) EndKey(user, fingerprint string) int { return h.conns.EndKey(user, fingerprint) }

// EndConversation closes the connections bound to conversation cid with
// CloseConversationDeleted.
func (h *Handler) EndConversation(cid string) int { return h.conns.EndConversation(cid) }

// closeCode is the close code of a connection ended for r.
func closeCode(r conns.Reason) websocket.StatusCode {
	if r == conns.ConversationDeleted {
		return CloseConversationDeleted
	}
	return CloseSignedOut
}

// Shutdown ends every open connection with close code 1012 (service
// restart: the client reconnects, to this gateway once it is back or to
// another one) and waits until their sessions are over or ctx ends. The
// HTTP server's own Shutdown does not reach hijacked WebSocket
// connections; without this a client would stay attached to a session
// that no longer forwards anything. Upgrades asked for afterwards get 503.
func (h *Handler) Shutdown(ctx context.Context) error { return h.conns.Shutdown(ctx) }

// transport writes frames as binary WebSocket messages once ready is closed
// (the ServerInfo is out), so the ServerInfo is always the first frame.
type transport struct {
	c     *websocket.Conn
	ready <-chan struct{}
}

func (t transport) Send(ctx context.Context, frame []byte) error {
	select {
	case <-t.ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return t.c.Write(ctx, websocket.MessageBinary, frame)
}

// Serve is the echo handler of /v1/ws (behind auth.Middleware).
func (h *Handler) Serve(c echo.Context) error {
	user := auth.UserOf(c)
	p := conns.Principal{User: user, Key: auth.KeyOf(c)}
	sid, _, bySession := auth.SessionOf(c)
	if bySession {
		p.Session = session.KeyOf(sid)
	}
	tracked, err := h.conns.Open(p, h.ConnectionsPerUser)
	switch {
	case errors.Is(err, conns.ErrTooMany):
		return echo.NewHTTPError(http.StatusTooManyRequests,
			fmt.Sprintf("too many WebSocket connections for this user (at most %d); close one first", h.ConnectionsPerUser))
	case err != nil:
		return echo.NewHTTPError(http.StatusServiceUnavailable, "the server is shutting down; reconnect")
	}
	defer tracked.Release()
	if bySession && h.Sessions != nil {
		if _, err := h.Sessions.Lookup(c.Request().Context(), sid); errors.Is(err, session.ErrNotFound) {
			return echo.NewHTTPError(http.StatusUnauthorized, "the session expired or was signed out; sign in again (POST /v1/session)")
		}
	}
	conn, err := websocket.Accept(c.Response(), c.Request(), &websocket.AcceptOptions{OriginPatterns: h.OriginPatterns})
	if err != nil {
		return nil // Accept already answered the request
	}
	conn.SetReadLimit(int64(protocol.MaxEnvelopeSize) + 1024)
	log := h.Log.With().Str("user", user).Logger()
	ctx, cancel := context.WithCancel(c.Request().Context())
	defer cancel()
	ready := make(chan struct{})
	// Probing takes up to the probe timeout; the client's input is read and
	// published meanwhile, only what goes out waits.
	go func() {
		defer close(ready)
		h.sendServerInfo(ctx, conn, auth.IsAdmin(c), log)
	}()
	s := edge.NewSession(h.JS, h.Auth, transport{c: conn, ready: ready}, edge.Options{User: user, QueueSize: h.QueueSize,
		Limits: h.Limits, Users: h.Users, Accounts: h.Accounts, Budgets: h.Budgets, Backlog: h.Backlog, Log: log,
		OnConfigured: func(cid string, _ *protocol.Configuration) { tracked.Bind(cid) }})
	runErr := make(chan error, 1)
	go func() { runErr <- s.Run(ctx) }()
	// The reader's own context: cancelling a read drops the connection
	// without a close frame, so a revocation, which cancels the session
	// first, must not cancel the read; the close ends it. A peer that no
	// longer answers pings is dropped at once: both end.
	readCtx, cancelRead := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRead()
	go h.keepAlive(ctx, func() { cancelRead(); cancel() }, conn, log)
	// On Shutdown or a revocation the client is told first (a cancelled
	// read would drop the connection without a close frame), then the
	// session ends.
	// The close the session ends with: one, whoever decides it. A
	// revocation records its code before it cancels the session, so the
	// end of the session (below) closes with it, not with a normal close.
	var (
		closeOnce   sync.Once
		closeMu     sync.Mutex
		decidedCode websocket.StatusCode
		decidedWhy  string
	)
	closeWith := func(code websocket.StatusCode, why string) {
		closeOnce.Do(func() { conn.Close(code, why) })
	}
	decided := func() (websocket.StatusCode, string, bool) {
		closeMu.Lock()
		defer closeMu.Unlock()
		return decidedCode, decidedWhy, decidedCode != 0
	}
	go func() {
		select {
		case <-h.conns.Stopping():
			closeWith(websocket.StatusServiceRestart, "server restarting; reconnect")
			cancel()
		case <-tracked.Ended():
			r := tracked.Reason()
			log.Info().Str("conversation_id", s.ConversationID()).Stringer("reason", r).Msg("connection revoked")
			closeMu.Lock()
			decidedCode, decidedWhy = closeCode(r), r.String()
			closeMu.Unlock()
			// Cancelled first: nothing more is forwarded while the client
			// takes its time to answer the close.
			cancel()
			closeWith(closeCode(r), r.String())
		case <-ctx.Done():
		}
	}()
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer cancel()
		for {
			// Over its rate, the next frame is left unread: the flood backs
			// up in the client's socket instead of costing this server.
			if err := s.Pace(ctx); err != nil {
				return
			}
			typ, frame, err := conn.Read(readCtx)
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
	if code, why, ok := decided(); ok {
		closeWith(code, why) // revoked: the session ended because of it
	}
	switch {
	case errors.Is(err, edge.ErrSlowClient):
		closeWith(websocket.StatusTryAgainLater, "client too slow")
	case errors.Is(err, edge.ErrFlooding):
		closeWith(websocket.StatusPolicyViolation, "too many envelopes")
	case err != nil:
		log.Warn().Err(err).Msg("session ended")
		closeWith(websocket.StatusInternalError, "session ended")
	default:
		closeWith(websocket.StatusNormalClosure, "")
	}
	// The reader may be handling a frame still (a Configuration, say): the
	// session is only over once it has returned.
	cancel()
	<-readerDone
	return nil
}

// keepAlive pings the client every PingInterval and ends the connection
// (cancel) when a ping is not answered within the interval: a peer that
// vanished without closing would otherwise hold its session, consumer and
// connection slot until the TCP connection times out.
func (h *Handler) keepAlive(ctx context.Context, cancel context.CancelFunc, conn *websocket.Conn, log zerolog.Logger) {
	every := h.PingInterval
	if every <= 0 {
		every = 30 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, pcancel := context.WithTimeout(ctx, every)
		err := conn.Ping(pctx)
		pcancel()
		if err != nil {
			if ctx.Err() == nil {
				log.Info().Err(err).Msg("client did not answer a ping; disconnecting")
			}
			cancel()
			return
		}
	}
}

// sendServerInfo writes the ServerInfo frame.
func (h *Handler) sendServerInfo(ctx context.Context, conn *websocket.Conn, admin bool, log zerolog.Logger) {
	if h.ServerInfo == nil {
		return
	}
	info, err := h.ServerInfo(ctx, admin)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn().Err(err).Msg("server info")
		}
		return
	}
	frame, err := protocol.Encode(protocol.New("", info))
	if err != nil {
		log.Error().Err(err).Msg("encode ServerInfo")
		return
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = conn.Write(wctx, websocket.MessageBinary, frame) // a failed write ends the connection's reads too
}
