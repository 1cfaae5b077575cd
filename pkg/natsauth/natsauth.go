// Package natsauth is the one table of who may do what on the bus: a NATS
// user per service, with the subjects it may publish and subscribe to,
// derived from what each service does (ARCHITECTURE.md, Boundaries). The
// embedded server of `alicia up` (pkg/natsserver) is configured from it, and
// so is deploy/nats.conf (Conf, checked by a test).
//
// Two kinds of subject are granted. Data subjects (alicia.conv.…,
// alicia.sys.…, the work queues, core NATS audio and control) are what a
// service publishes or hears on core NATS; a JetStream publish is a publish
// on the data subject, so this is where a service is kept from speaking for
// the user or changing shared state. JetStream API subjects ($JS.API.…) are
// granted per stream: a service may create and read consumers only on the
// streams it consumes, and read single messages only from the streams it
// looks things up in. (A consumer on a stream delivers whatever its filter
// selects: within a stream, reading is not narrowed further.)
package natsauth

import (
	"slices"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/subjects"
)

// The services' user names: the service names.
const (
	Gateway     = "gateway"
	RoomAgent   = "room-agent"
	ASR         = "asr"
	LLM         = "llm"
	TTS         = "tts"
	Memory      = "memory"
	Persistence = "persistence"
	// Admin is the operator's user (alicia replay, the nats CLI): everything.
	Admin = "admin"
)

// Permissions of one user. Responses lets the user answer requests (reply
// subjects of the messages it received), as the request/reply services do.
type Permissions struct {
	Publish   []string
	Subscribe []string
	Responses bool
}

// User is one NATS user.
type User struct {
	Name string
	Permissions
}

// Services are the users of the Alicia services, in a fixed order.
func Services() []string {
	return []string{Gateway, RoomAgent, ASR, LLM, TTS, Memory, Persistence}
}

// Users is the whole table: the services, then Admin.
func Users() []User {
	var us []User
	for _, s := range Services() {
		us = append(us, User{Name: s, Permissions: For(s)})
	}
	return append(us, User{Name: Admin, Permissions: Permissions{Publish: []string{">"}, Subscribe: []string{">"}}})
}

// llmTurns is the llm's turn queue (services/llm/internal/queue.Stream),
// created by the llm.
const llmTurns = "LLM_TURNS"

// Client subjects only the edges publish wholesale; other services publish
// single types on the user's behalf.
var (
	clientAll = "alicia.conv.*.client.>"
	serverAll = "alicia.conv.*.server.>"
)

func server(t protocol.MessageType) string { return subjects.AllOfType(subjects.OriginServer, t) }
func client(t protocol.MessageType) string { return subjects.AllOfType(subjects.OriginClient, t) }
func agent(t protocol.MessageType) string  { return subjects.AllOfType(subjects.OriginAgent, t) }

// For returns the permissions of service (the zero value for an unknown name).
func For(service string) Permissions {
	var p Permissions
	switch service {
	case Gateway:
		// The HTTP edge: client envelopes of its users, REST writes
		// (server envelopes, administrators' tool and MCP settings), room
		// dispatch; forwards server envelopes through ordered consumers.
		p.Publish = []string{clientAll, serverAll,
			subjects.System(protocol.TypeToolSetting), subjects.System(protocol.TypeMCPServerConfig),
			subjects.AllDispatch,
			rpc.AppliedSubject, rpc.MemorySearchSubject, rpc.MemoryActionSubject}
		p.Publish = append(p.Publish, consume(bus.StreamConversations)...)
		p.Publish = append(p.Publish, lookup(bus.StreamConversations, bus.StreamDispatch)...)
	case RoomAgent:
		// The LiveKit edge: client envelopes from the data channel and on
		// the user's behalf (ControlStop, AudioChunk, Configuration),
		// playout records, ASR jobs; hears SpeechAudio on core NATS.
		p.Publish = []string{clientAll, serverAll, agent(protocol.TypeSentencePlayout), subjects.AllASRJobs}
		p.Subscribe = []string{subjects.AllAudioOut}
		p.Publish = append(p.Publish, consume(bus.StreamConversations, bus.StreamDispatch)...)
		p.Publish = append(p.Publish, lookup(bus.StreamConversations)...)
	case ASR:
		// The final transcript becomes the user's UserMessage.
		p.Publish = []string{server(protocol.TypeTranscription), server(protocol.TypeErrorMessage),
			client(protocol.TypeUserMessage), subjects.AllDeadLetters}
		p.Publish = append(p.Publish, consume(bus.StreamASRJobs)...)
		p.Publish = append(p.Publish, lookup(bus.StreamConversations, bus.StreamASRJobs)...)
	case LLM:
		// Answers; tool registrations and MCP server status on alicia.sys;
		// stops and configurations heard on core NATS.
		p.Publish = []string{serverAll,
			subjects.System(protocol.TypeToolRegistration), subjects.System(protocol.TypeMCPServerStatus),
			rpc.HistorySubject, rpc.AppliedSubject, rpc.MemorySearchSubject,
			streamAPI("CREATE", llmTurns), streamAPI("UPDATE", llmTurns), streamAPI("INFO", llmTurns)}
		p.Subscribe = []string{client(protocol.TypeControlStop), client(protocol.TypeConfiguration)}
		p.Publish = append(p.Publish, consume(llmTurns, bus.StreamSystem)...)
		p.Publish = append(p.Publish, lookup(bus.StreamConversations)...)
	case TTS:
		// SpeechAudio on core NATS, one SentenceAudio record per sentence;
		// hears the turn's sentences, starts, stops and errors on core NATS.
		p.Publish = []string{subjects.AllAudioOut, agent(protocol.TypeSentenceAudio), server(protocol.TypeErrorMessage)}
		p.Subscribe = []string{client(protocol.TypeControlStop), server(protocol.TypeAssistantSentence),
			server(protocol.TypeStartAnswer), server(protocol.TypeErrorMessage)}
		p.Publish = append(p.Publish, consume(bus.StreamConversations)...)
		p.Publish = append(p.Publish, lookup(bus.StreamConversations)...)
	case Memory:
		// The embedded MemoryAction on alicia.sys, confirmations to the
		// client; serves memory.search and memory.action.
		p.Publish = []string{subjects.System(protocol.TypeMemoryAction),
			server(protocol.TypeMemoryConfirmation), server(protocol.TypeErrorMessage),
			subjects.AllDeadLetters, rpc.AppliedSubject}
		p.Subscribe = []string{rpc.MemorySearchSubject, rpc.MemoryActionSubject, "$SRV.>"}
		p.Responses = true
		p.Publish = append(p.Publish, consume(bus.StreamConversations)...)
	case Persistence:
		// Consumes everything stored; serves history.get and
		// persistence.applied; publishes nothing but dead letters.
		p.Publish = []string{subjects.AllDeadLetters}
		p.Subscribe = []string{rpc.HistorySubject, rpc.AppliedSubject, "$SRV.>"}
		p.Responses = true
		p.Publish = append(p.Publish, consume(bus.StreamConversations, bus.StreamSystem)...)
	default:
		return Permissions{}
	}
	// Every service: bus.Connect creates or updates the shared streams,
	// JetStream answers (publish acks, API replies) and request replies
	// arrive on the connection's inbox.
	p.Publish = append(p.Publish, "$JS.API.INFO")
	for _, s := range bus.StreamNames() {
		p.Publish = append(p.Publish, streamAPI("CREATE", s), streamAPI("UPDATE", s), streamAPI("INFO", s))
	}
	p.Subscribe = append(p.Subscribe, "_INBOX.>")
	p.Publish = dedupe(p.Publish)
	return p
}

func streamAPI(op, stream string) string { return "$JS.API.STREAM." + op + "." + stream }

// consume is what creating, reading, pulling from and acknowledging
// consumers (durable or ordered) on the streams takes.
func consume(streams ...string) []string {
	var out []string
	for _, s := range streams {
		out = append(out,
			"$JS.API.CONSUMER.CREATE."+s+".>",
			"$JS.API.CONSUMER.DURABLE.CREATE."+s+".>",
			"$JS.API.CONSUMER.INFO."+s+".>",
			"$JS.API.CONSUMER.DELETE."+s+".>",
			"$JS.API.CONSUMER.MSG.NEXT."+s+".>",
			"$JS.ACK."+s+".>",
		)
	}
	return out
}

// lookup is what reading single messages (last per subject, bus.Replay's
// batched direct gets) from the streams takes.
func lookup(streams ...string) []string {
	var out []string
	for _, s := range streams {
		out = append(out, "$JS.API.DIRECT.GET."+s, "$JS.API.DIRECT.GET."+s+".>", "$JS.API.STREAM.MSG.GET."+s)
	}
	return out
}

func dedupe(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
