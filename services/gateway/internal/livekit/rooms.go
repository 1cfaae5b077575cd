package livekit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	livekitpb "github.com/livekit/protocol/livekit"
	lksdk "github.com/livekit/server-sdk-go/v2"
	"github.com/twitchtv/twirp"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// PrincipalAttribute is the participant attribute a token carries: a tag
// of the session (or API key) it was issued to, so that ending the session
// can find the participants it let in (Rooms.EndSession). It names no
// secret: a hash of the session's bucket key, itself a hash of its id.
const PrincipalAttribute = "alicia.principal"

// PrincipalTag is the PrincipalAttribute of a token issued to the session
// of bucket key sessionKey (session.KeyOf), or, for a request made with an
// API key, of "key:" and the key's fingerprint.
func PrincipalTag(principal string) string {
	sum := sha256.Sum256([]byte("alicia livekit principal\x00" + principal))
	return hex.EncodeToString(sum[:16])
}

// Rooms ends LiveKit participation through the server's RoomService API:
// a participant removed (or a room deleted) is disconnected at once, and
// the client SDK does not reconnect by itself. What LiveKit cannot do is
// void a token: the one a removed participant holds (LiveKit refreshes it
// while it is connected, for 10 minutes at a time) can join again until it
// expires. A deleted conversation's room serves nothing then (no agent is
// dispatched to it), and a signed-out session cannot get a new token.
type Rooms struct {
	svc *lksdk.RoomServiceClient
}

// NewRooms returns the RoomService client of the server at url (ws(s)://
// or http(s)://, the server's own URL, not the public one).
func NewRooms(url, apiKey, apiSecret string) *Rooms {
	return &Rooms{svc: lksdk.NewRoomServiceClient(url, apiKey, apiSecret)}
}

// notFound reports a twirp "not found": no such room or participant.
func notFound(err error) bool {
	var te twirp.Error
	return errors.As(err, &te) && te.Code() == twirp.NotFound
}

// EndConversation deletes the room of conversation cid: every participant,
// the room-agent included, is disconnected. No room is not an error.
func (r *Rooms) EndConversation(ctx context.Context, cid string) error {
	_, err := r.svc.DeleteRoom(ctx, &livekitpb.DeleteRoomRequest{Room: protocol.RoomName(cid)})
	if err != nil && !notFound(err) {
		return fmt.Errorf("livekit: delete the room of %s: %w", cid, err)
	}
	return nil
}

// EndPrincipal removes the participants that joined with a token issued
// to principal (PrincipalTag's argument) from every conversation's room
// and returns how many it removed. It lists the server's rooms and the
// participants of each (the rooms' participant counts lag): a request
// per open room.
func (r *Rooms) EndPrincipal(ctx context.Context, principal string) (int, error) {
	rooms, err := r.svc.ListRooms(ctx, &livekitpb.ListRoomsRequest{})
	if err != nil {
		return 0, fmt.Errorf("livekit: list rooms: %w", err)
	}
	tag, n := PrincipalTag(principal), 0
	var errs []error
	for _, room := range rooms.GetRooms() {
		if !strings.HasPrefix(room.GetName(), protocol.RoomName("")) {
			continue
		}
		ps, err := r.svc.ListParticipants(ctx, &livekitpb.ListParticipantsRequest{Room: room.GetName()})
		if notFound(err) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, p := range ps.GetParticipants() {
			if p.GetAttributes()[PrincipalAttribute] != tag {
				continue
			}
			who := &livekitpb.RoomParticipantIdentity{Room: room.GetName(), Identity: p.GetIdentity()}
			if _, err := r.svc.RemoveParticipant(ctx, who); err != nil && !notFound(err) {
				errs = append(errs, err)
				continue
			}
			n++
		}
	}
	if err := errors.Join(errs...); err != nil {
		return n, fmt.Errorf("livekit: remove participants: %w", err)
	}
	return n, nil
}
