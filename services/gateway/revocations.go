package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/services/gateway/internal/auth"
	"github.com/alicia-voice/alicia/services/gateway/internal/conns"
	"github.com/alicia-voice/alicia/services/gateway/internal/rest"
	"github.com/alicia-voice/alicia/services/gateway/internal/session"
	"github.com/alicia-voice/alicia/services/gateway/internal/ws"
)

// roomRemovalTimeout bounds the LiveKit requests that remove an ended
// session's participants.
const roomRemovalTimeout = 10 * time.Second

// keySessionsTimeout bounds ending the sessions of a removed API key.
const keySessionsTimeout = 10 * time.Second

// revocations makes revocation take effect on this replica, whichever
// replica it came from: a session that ends (signed out, evicted by a
// newer sign-in, expired; heard through the sessions bucket) closes the
// WebSockets and timeline streams it opened and removes the LiveKit
// participants its tokens let in; a deleted conversation (heard on
// subjects.GatewayRevocations) closes the connections to it. The
// sessions' WebSocket and timeline checks are also asked again once a
// connection is counted. It runs until ctx ends or stop is called; stop
// waits for what it started. endKeys makes the removal of API keys take
// effect (keysReloader calls it on every replica, each reading the keys
// file itself).
func revocations(ctx context.Context, nc *nats.Conn, sessions *session.Store, wsh *ws.Handler, api *rest.API, log zerolog.Logger) (
	endKeys func(context.Context, []auth.KeyRef), stop func(), err error) {
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
		return nil, nil, err
	}
	sub, err := conns.Subscribe(nc, log, func(r conns.Revocation) {
		if n := wsh.EndConversation(r.Conversation) + api.EndConversation(r.Conversation); n > 0 {
			log.Info().Str("conversation_id", r.Conversation).Int("connections", n).Msg("conversation deleted: its connections closed")
		}
	})
	if err != nil {
		cancel()
		<-watched
		return nil, nil, err
	}
	// A removed key: the connections it opened, directly or through a
	// session, close at once ("the API key was removed"); its sessions end
	// everywhere (the watch above then removes their LiveKit participants
	// on every replica); the participants let in with the key itself are
	// removed here.
	endKeys = func(kctx context.Context, removed []auth.KeyRef) {
		for _, k := range removed {
			if n := wsh.EndKey(k.User, k.Fingerprint) + api.EndKey(k.User, k.Fingerprint); n > 0 {
				log.Info().Str("user", k.User).Int("connections", n).Msg("API key removed: its connections closed")
			}
			sctx, scancel := context.WithTimeout(kctx, keySessionsTimeout)
			n, err := sessions.EndKey(sctx, k.User, k.Fingerprint)
			scancel()
			if err != nil && kctx.Err() == nil {
				log.Error().Err(err).Str("user", k.User).Msg("end the sessions of a removed API key; their cookies get 401 all the same")
			}
			if n > 0 {
				log.Info().Str("user", k.User).Int("sessions", n).Msg("API key removed: its sessions ended")
			}
		}
		if api.Rooms == nil {
			return
		}
		for _, k := range removed {
			removals.Add(1)
			go func() {
				defer removals.Done()
				rctx, rcancel := context.WithTimeout(ctx, roomRemovalTimeout)
				defer rcancel()
				n, err := api.Rooms.EndPrincipal(rctx, rest.KeyPrincipal(k.Fingerprint))
				if err != nil && ctx.Err() == nil {
					log.Warn().Err(err).Msg("remove a removed API key's LiveKit participants; they stay until they leave")
				}
				if n > 0 {
					log.Info().Str("user", k.User).Int("participants", n).Msg("API key removed: its LiveKit participants removed")
				}
			}()
		}
	}
	return endKeys, func() {
		sub.Close()
		cancel()
		<-watched
		removals.Wait()
	}, nil
}
