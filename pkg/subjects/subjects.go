// Package subjects is the only place NATS subject strings are built or parsed.
//
// Layout (see ARCHITECTURE.md, Subjects):
//
//	alicia.conv.{cid}.client.{type}   envelopes from a client
//	alicia.conv.{cid}.server.{type}   envelopes for the client
//	alicia.conv.{cid}.agent.{type}    internal envelopes of one conversation (playout, sentence audio); never forwarded to a client
//	alicia.sys.{type}                 envelopes not tied to one conversation
//	alicia.dlq.{consumer}             dead letters, with the reason in headers
//	alicia.asr.jobs.{cid}             ASR work queue
//	alicia.agent.dispatch.{user}.{cid} room-agent dispatch work queue ({user}: DispatchUser)
//	alicia.audio.{cid}.out            playout audio (core NATS)
//	alicia.ctl.{cid}                  immediate control (core NATS)
//	alicia.spec.{cid}.{kind}          speculative turn work (core NATS): transcript, preempt, speak
//	alicia.turns.{k}.{cid}.{type}     llm turn queue, partition k (turns.go)
package subjects

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Typed is anything that names a message type token (protocol.MessageType).
type Typed interface{ Token() string }

// Origin says who produced an envelope on a conversation subject.
type Origin string

// Origins.
const (
	OriginClient Origin = "client"
	OriginServer Origin = "server"
	// OriginAgent: internal envelopes about one conversation that the
	// services exchange and persistence stores, never sent to a client.
	OriginAgent Origin = "agent"
)

// Wildcards and stream subject filters.
const (
	root             = "alicia"
	AllConversations = "alicia.conv.>"
	AllSystem        = "alicia.sys.>"
	AllDeadLetters   = "alicia.dlq.>"
	AllASRJobs       = "alicia.asr.jobs.>"
	AllDispatch      = "alicia.agent.dispatch.>"
	AllAudioOut      = "alicia.audio.*.out"
	// AllSpecTranscripts, AllSpecPreempts and AllSpecSpeak match the
	// speculative work of every conversation (SpecTranscript, SpecPreempt,
	// SpecSpeak).
	AllSpecTranscripts = "alicia.spec.*.transcript"
	AllSpecPreempts    = "alicia.spec.*.preempt"
	AllSpecSpeak       = "alicia.spec.*.speak"
	// AllPersistenceProgress: the persistence instances' announcements of
	// how far they applied their partitions (core NATS).
	AllPersistenceProgress = "alicia.persistence.progress.>"
	// GatewayRevocations: the gateway replicas tell each other, on core
	// NATS, what was revoked (a deleted conversation), so that each ends
	// its own connections to it.
	GatewayRevocations = "alicia.gateway.revocations"
	// OptimizeCancel: the gateway asks, on core NATS, for an optimisation
	// run to be cancelled (the body is its id); the llm replica doing it
	// stops it.
	OptimizeCancel = "alicia.optimize.cancel"
)

// ErrInvalid is returned by Parse and Validate for subjects or tokens that do not fit the layout.
var ErrInvalid = errors.New("subjects: invalid")

// ValidToken reports whether s can stand as one subject token: non-empty, no
// dots, wildcards or whitespace.
func ValidToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '.', '*', '>', ' ', '\t', '\r', '\n':
			return false
		default:
			if c < 0x20 || c == 0x7f {
				return false
			}
		}
	}
	return true
}

// Validate returns an error when cid cannot be used in a subject.
func Validate[C ~string](cid C) error {
	if !ValidToken(string(cid)) {
		return fmt.Errorf("%w: conversation id %q", ErrInvalid, string(cid))
	}
	return nil
}

// Client is the subject of a client envelope of type t in conversation cid.
func Client[C ~string](cid C, t Typed) string {
	return conv(string(cid), OriginClient, t.Token())
}

// Server is the subject of a server envelope of type t in conversation cid.
func Server[C ~string](cid C, t Typed) string {
	return conv(string(cid), OriginServer, t.Token())
}

// Conversation matches every envelope of one conversation.
func Conversation[C ~string](cid C) string {
	return root + ".conv." + string(cid) + ".>"
}

// Agent is the subject of an internal envelope of type t about conversation cid.
func Agent[C ~string](cid C, t Typed) string {
	return conv(string(cid), OriginAgent, t.Token())
}

// ServerAll matches every server envelope of one conversation.
func ServerAll[C ~string](cid C) string {
	return root + ".conv." + string(cid) + ".server.>"
}

// ClientAll matches every client envelope of one conversation.
func ClientAll[C ~string](cid C) string {
	return root + ".conv." + string(cid) + ".client.>"
}

// AllOfType matches envelopes of type t from origin o in every conversation.
func AllOfType(o Origin, t Typed) string {
	return root + ".conv.*." + string(o) + "." + t.Token()
}

// System is the subject of a system envelope of type t.
func System(t Typed) string { return root + ".sys." + t.Token() }

// DeadLetter is where a consumer puts envelopes it cannot process.
func DeadLetter(consumer string) string { return root + ".dlq." + consumer }

// PersistenceProgress is where persistence instances announce, on core
// NATS, the offsets of the partitions of stream they applied.
func PersistenceProgress(stream string) string { return root + ".persistence.progress." + stream }

// ASRJob is the work-queue subject of ASR jobs for one conversation.
func ASRJob[C ~string](cid C) string { return root + ".asr.jobs." + string(cid) }

// AudioOut carries playout audio for one conversation on core NATS.
func AudioOut[C ~string](cid C) string { return root + ".audio." + string(cid) + ".out" }

// Dispatch is the work-queue subject asking a room-agent to join the room
// of cid for user. The user is a token of it (DispatchUser), so the rooms a
// user has requested or holds are counted with a subject filter
// (UserDispatches) by any gateway replica.
func Dispatch[C ~string](user string, cid C) string {
	return root + ".agent.dispatch." + DispatchUser(user) + "." + string(cid)
}

// UserDispatches matches the dispatch subjects of user's rooms.
func UserDispatches(user string) string { return root + ".agent.dispatch." + DispatchUser(user) + ".*" }

// DispatchUser is the subject token of a user in dispatch subjects: the
// first 16 hex digits of the SHA-256 of the user id (user ids may hold
// dots or spaces; a token of fixed length keeps subjects short).
func DispatchUser(user string) string {
	sum := sha256.Sum256([]byte(user))
	return hex.EncodeToString(sum[:8])
}

// DispatchConversation returns the conversation id of a Dispatch subject.
func DispatchConversation(subject string) (string, error) {
	rest, ok := strings.CutPrefix(subject, root+".agent.dispatch.")
	_, cid, two := strings.Cut(rest, ".")
	if !ok || !two || !ValidToken(cid) {
		return "", fmt.Errorf("%w: %q is not a dispatch subject", ErrInvalid, subject)
	}
	return cid, nil
}

// SpecTranscript carries, on core NATS, the transcript of a speculative
// ASR job (a Transcription envelope) from the asr to the room-agent.
func SpecTranscript[C ~string](cid C) string { return root + ".spec." + string(cid) + ".transcript" }

// SpecPreempt carries, on core NATS, the UserMessage a speculative
// transcript would become, from the asr to one llm replica (queue group),
// which starts the answer and holds it until the turn is confirmed.
func SpecPreempt[C ~string](cid C) string { return root + ".spec." + string(cid) + ".preempt" }

// SpecSpeak carries, on core NATS, the first sentence of a preemptive
// answer from the llm to one tts replica (queue group), which synthesises
// it ahead and holds the audio until the sentence is published for real.
func SpecSpeak[C ~string](cid C) string { return root + ".spec." + string(cid) + ".speak" }

// SpecConversation returns the conversation id of a Spec* subject.
func SpecConversation(subject string) (string, error) {
	rest, ok := strings.CutPrefix(subject, root+".spec.")
	cid, _, two := strings.Cut(rest, ".")
	if !ok || !two || !ValidToken(cid) {
		return "", fmt.Errorf("%w: %q is not a speculation subject", ErrInvalid, subject)
	}
	return cid, nil
}

// Control carries immediate control (stop, barge-in) for one conversation on core NATS.
func Control[C ~string](cid C) string { return root + ".ctl." + string(cid) }

func conv(cid string, o Origin, token string) string {
	var b strings.Builder
	b.Grow(len(root) + 6 + len(cid) + 1 + len(o) + 1 + len(token))
	b.WriteString(root)
	b.WriteString(".conv.")
	b.WriteString(cid)
	b.WriteByte('.')
	b.WriteString(string(o))
	b.WriteByte('.')
	b.WriteString(token)
	return b.String()
}

// Parsed is a conversation subject taken apart.
type Parsed struct {
	ConversationID string
	Origin         Origin
	TypeToken      string
}

// Parse splits alicia.conv.{cid}.{origin}.{type}.
func Parse(subject string) (Parsed, error) {
	parts := strings.Split(subject, ".")
	if len(parts) != 5 || parts[0] != root || parts[1] != "conv" {
		return Parsed{}, fmt.Errorf("%w: %q is not a conversation subject", ErrInvalid, subject)
	}
	o := Origin(parts[3])
	if o != OriginClient && o != OriginServer && o != OriginAgent {
		return Parsed{}, fmt.Errorf("%w: %q has origin %q", ErrInvalid, subject, parts[3])
	}
	if !ValidToken(parts[2]) || !ValidToken(parts[4]) {
		return Parsed{}, fmt.Errorf("%w: %q has an empty token", ErrInvalid, subject)
	}
	return Parsed{ConversationID: parts[2], Origin: o, TypeToken: parts[4]}, nil
}

// ParseSystem returns the type token of alicia.sys.{type}.
func ParseSystem(subject string) (string, error) {
	rest, ok := strings.CutPrefix(subject, root+".sys.")
	if !ok || !ValidToken(rest) {
		return "", fmt.Errorf("%w: %q is not a system subject", ErrInvalid, subject)
	}
	return rest, nil
}
