package rpc

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"
)

// A room-agent in a conversation's room answers on VoiceRoomSubject(cid)
// while it is there, so a service can ask whether a call is open in the
// conversation (the llm does before delivering a timer: spoken in the call,
// or written). No answer (no responders) is no call.
const voiceRoomPrefix = "alicia.rpc.voice_room."

// VoiceRoomSubjects is every conversation's VoiceRoomSubject (permissions).
const VoiceRoomSubjects = voiceRoomPrefix + "*"

// VoiceRoomSubject is where the agent in conversation cid's room answers.
func VoiceRoomSubject(cid string) string { return voiceRoomPrefix + cid }

// VoiceRoom is a room-agent's answer: the people in the call now.
type VoiceRoom struct {
	Humans int `msgpack:"humans"`
}

// ServeVoiceRoom answers VoiceRoomSubject(cid) with humans() until stop.
func ServeVoiceRoom(nc *nats.Conn, cid string, humans func() int) (stop func(), err error) {
	sub, err := nc.Subscribe(VoiceRoomSubject(cid), func(m *nats.Msg) {
		data, err := msgpack.Marshal(VoiceRoom{Humans: humans()})
		if err != nil {
			return
		}
		_ = m.Respond(data)
	})
	if err != nil {
		return nil, err
	}
	if err := nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// VoiceCallOpen reports whether a room-agent is in conversation cid's room
// with at least one person in the call. No room-agent there is false, nil.
func VoiceCallOpen(ctx context.Context, nc *nats.Conn, cid string) (bool, error) {
	m, err := nc.RequestWithContext(ctx, VoiceRoomSubject(cid), nil)
	if errors.Is(err, nats.ErrNoResponders) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var r VoiceRoom
	if err := msgpack.Unmarshal(m.Data, &r); err != nil {
		return false, err
	}
	return r.Humans > 0, nil
}
