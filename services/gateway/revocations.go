package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/services/gateway/internal/conns"
	"github.com/alicia-voice/alicia/services/gateway/internal/rest"
	"github.com/alicia-voice/alicia/services/gateway/internal/session"
	"github.com/alicia-voice/alicia/services/gateway/internal/ws"
)

// roomRemovalTimeout bounds the LiveKit requests that remove an ended
// session's participants.
const roomRemovalTimeout = 10 * time.Second

// revocations makes revocation take effect on this replica, whichever
// replica it came from: a session that ends (signed out, evicted by a
// newer sign-in, expired; heard through the sessions bucket) closes the
// WebSockets and timeline streams it opened and removes the LiveKit
// participants its tokens let in; a deleted conversation (heard on
// subjects.GatewayRevocations) closes the connections to it. The
// sessions' WebSocket and timeline checks are also asked again once a
// connection is counted. It runs until ctx ends or stop is called; stop
// waits for what it started.
func revocations(ctx context.Context, nc *nats.Conn, sessions *session.Store, wsh *ws.Handler, api *rest.API, log zerolog.Logger) (stop func(), err error) {
	wsh.Sessions, api.Sessions = sessions, sessions
	ctx, cancel := context.WithCancel(ctx)
	var removals sync.WaitGroup
	watched, err := sessions.WatchEnded(ctx, func(key string) {
		if n := wsh.EndSession(key) + api.EndSession(key); n > 0 {
			log.Info().Int("connections", n).Msg("session ended: its connections closed")
		}
		if api.Rooms == nil {
			return
		}
		removals.Add(1)
		go func() {
			defer removals.Done()
			rctx, rcancel := context.WithTimeout(ctx, roomRemovalTimeout)
			defer rcancel()
			n, err := api.Rooms.EndPrincipal(rctx, rest.SessionPrincipal(key))
			if err != nil && ctx.Err() == nil {
				log.Warn().Err(err).Msg("remove an ended session's LiveKit participants; they stay until they leave")
			}
			if n > 0 {
				log.Info().Int("participants", n).Msg("session ended: its LiveKit participants removed")
			}
		}()
	})
	if err != nil {
		cancel()
		return nil, err
	}
	sub, err := conns.Subscribe(nc, log, func(r conns.Revocation) {
		if n := wsh.EndConversation(r.Conversation) + api.EndConversation(r.Conversation); n > 0 {
			log.Info().Str("conversation_id", r.Conversation).Int("connections", n).Msg("conversation deleted: its connections closed")
		}
	})
	if err != nil {
		cancel()
		<-watched
		return nil, err
	}
	return func() {
		_ = sub.Unsubscribe()
		cancel()
		<-watched
		removals.Wait()
	}, nil
}
