package protocol

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// Envelope is one message on the wire. StanzaID 0 means "not stamped yet"
// (server producers publish without one; the delivering edge stamps it) and
// is omitted on the wire, as are an empty ConversationID and an empty Meta.
type Envelope struct {
	StanzaID       int32          `json:"stanzaId,omitempty" msgpack:"stanzaId,omitempty"`
	ConversationID string         `json:"conversationId,omitempty" msgpack:"conversationId,omitempty"`
	Type           MessageType    `json:"type" msgpack:"type"`
	Meta           map[string]any `json:"meta,omitempty" msgpack:"meta,omitempty"`
	Body           Body           `json:"body" msgpack:"body"`
}

// New returns an envelope for body with its Type set from the body.
func New(conversationID string, body Body) Envelope {
	return Envelope{ConversationID: conversationID, Type: body.MessageType(), Body: body}
}

const idAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// RoomName is the LiveKit room of a conversation: conv_{conversationId}.
func RoomName(conversationID string) string { return "conv_" + conversationID }

// DeriveID returns an id shaped like NewID (prefix + "_" + 20 base62
// characters) derived from parts (SHA-256 of their text forms), so work
// that is redone after a crash or redelivery names what it publishes the
// same way and retried publishes de-duplicate.
func DeriveID(prefix string, parts ...any) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprint(h, p)
		h.Write([]byte{0})
	}
	sum := h.Sum(nil)
	out := make([]byte, 0, len(prefix)+21)
	out = append(out, prefix...)
	out = append(out, '_')
	for _, v := range []uint64{binary.BigEndian.Uint64(sum), binary.BigEndian.Uint64(sum[8:])} {
		for range 10 { // 62^10 < 2^64
			out = append(out, idAlphabet[v%62])
			v /= 62
		}
	}
	return string(out)
}

// NewID returns prefix + "_" + 20 random base62 characters (~119 bits), e.g.
// NewID("am") = "am_3kTMd9QxW0bYzLp2Rv7a".
func NewID(prefix string) string {
	const n = 20
	var buf [n + 8]byte
	out := make([]byte, 0, len(prefix)+1+n)
	out = append(out, prefix...)
	out = append(out, '_')
	for len(out) < len(prefix)+1+n {
		_, _ = rand.Read(buf[:]) // crypto/rand.Read never fails (Go 1.24+)
		for _, b := range buf {
			// 248 = 4*62: rejection sampling keeps the distribution uniform.
			if b < 248 && len(out) < len(prefix)+1+n {
				out = append(out, idAlphabet[b%62])
			}
		}
	}
	return string(out)
}
