// Package livekit issues the access tokens a client joins a conversation's
// LiveKit room with, and asks a room-agent to join that room (an
// AgentDispatch on the AGENT_DISPATCH work queue).
package livekit

import (
	"github.com/alicia-voice/alicia/pkg/restapi"

	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/livekit/protocol/auth"
	livekitpb "github.com/livekit/protocol/livekit"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/telemetry"
)

// Tokens signs room tokens with the server's API key and secret.
type Tokens struct {
	// URL is what clients connect to (the public URL when one is set).
	URL               string
	APIKey, APISecret string
	TTL               time.Duration
}

// Grant is a token for one user in one room, as POST
// /v1/conversations/{id}/token answers it (ExpiresAt in ms since the Unix
// epoch).
type Grant = restapi.RoomToken

// Issue returns a token letting identity join the room of cid — that room
// only — publish its microphone and data (no camera, no screen share: each
// published track costs the agent a listener and ASR jobs) and subscribe,
// valid for TTL from now. The participant carries PrincipalTag(principal)
// (PrincipalAttribute): ending that session removes it (Rooms.EndPrincipal).
//
// TTL is short (ALICIA_LIVEKIT_TOKEN_TTL, 5 minutes): the token only has
// to last until the client joins. Once in the room, LiveKit's server sends
// the client a refreshed token every 5 minutes, which the client SDK
// reconnects with; a client that joins again later asks for a new one,
// which a revoked session cannot get.
func (t Tokens) Issue(cid, identity, principal string, now time.Time) (Grant, error) {
	room := protocol.RoomName(cid)
	yes := true
	grant := &auth.VideoGrant{RoomJoin: true, Room: room, CanPublish: &yes, CanSubscribe: &yes, CanPublishData: &yes}
	grant.SetCanPublishSources([]livekitpb.TrackSource{livekitpb.TrackSource_MICROPHONE})
	at := auth.NewAccessToken(t.APIKey, t.APISecret).
		SetIdentity(identity).
		SetName(identity).
		SetValidFor(t.TTL).
		SetAttributes(map[string]string{PrincipalAttribute: PrincipalTag(principal)}).
		SetVideoGrant(grant)
	jwt, err := at.ToJWT()
	if err != nil {
		return Grant{}, fmt.Errorf("livekit: sign token: %w", err)
	}
	// The token's exp is whole seconds from the signing time (at most now+TTL).
	exp := now.Add(t.TTL).Truncate(time.Second)
	return Grant{URL: t.URL, Token: jwt, Room: room, Identity: identity, ExpiresAt: exp.UnixMilli()}, nil
}

// Dispatcher puts AgentDispatch requests on the work queue.
type Dispatcher struct {
	JS jetstream.JetStream
	// RoomsPerUser bounds the rooms a user has requested or an agent holds
	// (0: no limit). They are counted on the work queue itself (the user is
	// in the subject), so every gateway replica sees the same count; two
	// replicas asked at the same instant may let one more through.
	RoomsPerUser int
}

// ErrTooManyRooms refuses a dispatch beyond RoomsPerUser.
var ErrTooManyRooms = errors.New("livekit: too many rooms for this user")

// errCodeStreamStoreFailed is JetStream's API error code for a message the
// stream refused to store; with DiscardNewPerSubject, its "maximum messages
// per subject exceeded" means a request for the subject is already pending.
const errCodeStreamStoreFailed = 10077

// Request asks for an agent in the room of cid. It reports false (and no
// error) when a request is already pending or held by an agent in the
// room: the work queue keeps one per conversation.
func (d Dispatcher) Request(ctx context.Context, cid, user string, now time.Time) (bool, error) {
	if d.RoomsPerUser > 0 {
		n, held, err := d.rooms(ctx, cid, user)
		switch {
		case err != nil:
			return false, err
		case held:
			return false, nil
		case n >= d.RoomsPerUser:
			return false, fmt.Errorf("%w: %d rooms requested or held (at most %d)", ErrTooManyRooms, n, d.RoomsPerUser)
		}
	}
	env := protocol.New(cid, &protocol.AgentDispatch{
		ConversationID: cid, Room: protocol.RoomName(cid), UserID: &user, RequestedAt: now.UnixMilli()})
	env.Meta = telemetry.InjectMeta(ctx, env.Meta)
	data, err := protocol.Encode(env)
	if err != nil {
		return false, fmt.Errorf("livekit: encode dispatch: %w", err)
	}
	if _, err := d.JS.Publish(ctx, subjects.Dispatch(user, cid), data); err != nil {
		if AlreadyDispatched(err) {
			return false, nil
		}
		return false, fmt.Errorf("livekit: dispatch: %w", err)
	}
	return true, nil
}

// rooms counts the user's requests pending or held on the work queue and
// says whether cid's is among them.
func (d Dispatcher) rooms(ctx context.Context, cid, user string) (int, bool, error) {
	st, err := d.JS.Stream(ctx, bus.StreamDispatch)
	if err != nil {
		return 0, false, fmt.Errorf("livekit: dispatch stream: %w", err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subjects.UserDispatches(user)))
	if err != nil {
		return 0, false, fmt.Errorf("livekit: count rooms: %w", err)
	}
	_, held := info.State.Subjects[subjects.Dispatch(user, cid)]
	return len(info.State.Subjects), held, nil
}

// AlreadyDispatched reports whether a publish to the dispatch queue failed
// because the conversation's one request is already there.
func AlreadyDispatched(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && api.ErrorCode == errCodeStreamStoreFailed
}

// SignalProxy forwards LiveKit's signalling — the client SDK's WebSocket
// at /rtc (and /rtc/v1) and its HTTP check /rtc/validate — to the server
// at target (ws(s):// or http(s)://), so that a browser reaches it on the
// page's own origin and certificate: one name and one trusted certificate
// are enough for voice. The media do not pass here: they flow between the
// browser and the server's ICE ports (UDP, TCP as the fallback).
func SignalProxy(target string) (http.Handler, error) {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("livekit: signalling proxy: bad server URL %q", target)
	}
	switch u.Scheme {
	case "ws", "http":
		u.Scheme = "http"
	case "wss", "https":
		u.Scheme = "https"
	default:
		return nil, fmt.Errorf("livekit: signalling proxy: bad server URL %q", target)
	}
	u.Path, u.RawQuery = "", ""
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.SetXForwarded()
		},
		FlushInterval: -1,
	}, nil
}

// SameOriginURL is the LiveKit URL of a client that reaches LiveKit through
// SignalProxy: the WebSocket origin of the page it came from (wss:// when
// the request came over TLS or through a TLS proxy that said so).
func SameOriginURL(r *http.Request, scheme string) string {
	ws := "ws"
	if scheme == "https" {
		ws = "wss"
	}
	return ws + "://" + r.Host
}
