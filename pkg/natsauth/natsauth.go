// Package natsauth is the one table of who may do what on the bus: a NATS
// user per service, with the subjects it may publish and subscribe to,
// derived from what each service does (ARCHITECTURE.md, Boundaries). The
// embedded server of `alicia up` (pkg/natsserver) is configured from it, and
// so are deploy/nats.conf (Conf) and the Helm chart's NATS values
// (HelmValues: deploy/helm/alicia/examples/nats-auth-values.yaml), each
// checked by a test.
//
// Two kinds of subject are granted. Data subjects (alicia.conv.…,
// alicia.sys.…, the work queues, core NATS audio and control) are what a
// service publishes or hears on core NATS; a JetStream publish is a publish
// on the data subject, so this is where a service is kept from speaking for
// the user or changing shared state. JetStream API subjects ($JS.API.…) are
// granted per stream. The shared streams' configuration is their owner's,
// bus.StreamsOwner (persistence): every service may create one that is
// missing (the server refuses a create that differs from the stream) and
// read it, only the owner may update it, and no service may purge or
// delete it. Consumers on the shared streams are granted per filter: only
// persistence may create consumers that select anything on CONVERSATIONS and
// SYSTEM; every other service may create consumers there only with the
// single filter subjects it uses, named in the create subject
// ($JS.API.CONSUMER.CREATE.<stream>.<consumer>.<filter>, which nats.go's
// jetstream sends for a consumer with a single filter subject and the server
// checks against the consumer's filter; the gateway's debug timeline reads
// one conversation through a filter on alicia.conv.{cid}.>, granted as
// alicia.conv.*.>). The work queues it pulls from (ASR jobs, dispatch
// requests, the llm's turns) it may consume whole. Speculative work of a
// voice turn (alicia.spec.{cid}.*) travels on core NATS only.
//
// Pulling from, acknowledging, reading, deleting and creating a consumer
// are granted per stream (ordered consumers have random names), so the
// services' durable consumers (Durables) are each denied to every other
// service that could otherwise reach them: no one but persistence can pull
// from persistence's durable and take envelopes away from it.
//
// Single messages are read with direct gets. The last message on a subject
// ($JS.API.DIRECT.GET.<stream>.<subject>, what nats.go's
// GetLastMsgForSubject sends on streams with AllowDirect) is granted per
// subject pattern. Reads by sequence ($JS.API.DIRECT.GET.<stream> with the
// request in the body, bus.Replay) name no subject the server could check,
// so they read any message of the stream: only the llm, which reads whole
// conversations to resume a turn, has them, on CONVERSATIONS.
package natsauth

import (
	"slices"

	"github.com/alicia-voice/alicia/pkg/backlog"
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
// PublishDeny and SubscribeDeny take subjects back from Publish and
// Subscribe (nats-server's deny lists: a deny wins over an allow).
type Permissions struct {
	Publish       []string
	Subscribe     []string
	PublishDeny   []string
	SubscribeDeny []string
	Responses     bool
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

// PersistenceConsumer is persistence's durable consumer on CONVERSATIONS
// and SYSTEM, its default name (services/persistence Config.Consumer).
const PersistenceConsumer = "persistence"

// Durable is a durable consumer a service owns on a stream.
type Durable struct{ Owner, Stream, Name string }

// Durables are the services' durable consumers with their default names
// (each service's config; persistence's is PersistenceConsumer, though its
// instances' consumers are named PersistenceConsumer-<instance>-<random
// token>: no other service can list consumers or guess that name). Each is
// denied to the other services. A deployment that renames one (e.g.
// ALICIA_PERSISTENCE_CONSUMER) must add it here and regenerate
// deploy/nats.conf, or the other services are no longer kept from it. The
// llm's turn consumers (llm-p<k>) are on LLM_TURNS, which no other service
// may use.
func Durables() []Durable {
	return []Durable{
		{Persistence, bus.StreamConversations, PersistenceConsumer},
		{Persistence, bus.StreamSystem, PersistenceConsumer},
		{Memory, bus.StreamConversations, "memory"},
		{Memory, bus.StreamConversations, "memory-extraction"},
		{LLM, bus.StreamConversations, llmJudge},
		{LLM, bus.StreamSystem, llmOptimize},
		{LLM, bus.StreamConversations, llmTitles},
		{TTS, bus.StreamConversations, "tts"},
		{RoomAgent, bus.StreamDispatch, "room-agent"},
		{ASR, bus.StreamASRJobs, "asr"},
	}
}

// SessionsBucket is the gateway's KeyValue bucket of web client sessions
// (services/gateway/internal/session), stream KV_SESSIONS: only the
// gateway may create, read or write it.
const SessionsBucket = "SESSIONS"

// llmTurns is the llm's turn queue (services/llm/internal/queue.Stream),
// created by the llm.
const llmTurns = "LLM_TURNS"

// llmJudge is the llm's judge consumer on CONVERSATIONS
// (services/llm/internal/judge.ConsumerName).
const llmJudge = "llm-judge"

// llmTitles is the llm's titles consumer on CONVERSATIONS
// (services/llm/internal/titles.ConsumerName).
const llmTitles = "llm-titles"

// llmOptimize is the llm's optimiser consumer on SYSTEM
// (services/llm/internal/optimize.ConsumerName).
const llmOptimize = "llm-optimize"

// llmTurnLeases is the llm's bucket of turns running per user
// (services/llm/internal/queue.LeaseBucket).
const llmTurnLeases = "LLM_TURN_LEASES"

// timerClaims is the llm's bucket of timers being delivered
// (services/llm/internal/timers.ClaimBucket).
const timerClaims = "TIMER_CLAIMS"

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
		// (server envelopes, administrators' tool and MCP settings,
		// promoted and rolled back prompt versions), room dispatch;
		// forwards server envelopes through ordered consumers.
		p.Publish = []string{clientAll, serverAll,
			subjects.System(protocol.TypeToolSetting), subjects.System(protocol.TypeMCPServerConfig),
			subjects.System(protocol.TypePromptVersion),
			// Prompt optimisation: runs, a queued run's cancellation,
			// dimension preferences, elite selections; a running run's
			// cancellation on core NATS.
			subjects.System(protocol.TypeOptimizationRun), subjects.System(protocol.TypeEliteOptions),
			subjects.System(protocol.TypeDimensionPreference), subjects.System(protocol.TypeEliteSelect),
			subjects.OptimizeCancel,
			subjects.AllDispatch,
			rpc.AppliedSubject, rpc.MemorySearchSubject, rpc.MemoryActionSubject}
		// The owner's debug timeline (GET /v1/conversations/{id}/timeline)
		// reads one conversation's envelopes of every origin through
		// consumers filtered on alicia.conv.{cid}.>. A * in a filter is a
		// token like any other to the server: with this the gateway may
		// also create a consumer on alicia.conv.*.> (every conversation), as
		// it could already on alicia.conv.*.server.>.
		p.Publish = append(p.Publish, consumeFiltered(bus.StreamConversations, serverAll, subjects.Conversation("*"))...)
		// The web client's sessions.
		p.Publish = append(p.Publish, keyValue(SessionsBucket)...)
		// Watching the sessions that end (sign-out, eviction, expiry), on
		// every replica, to close their connections: a consumer on the
		// bucket's keys.
		p.Publish = append(p.Publish, consumeFiltered("KV_"+SessionsBucket, "$KV."+SessionsBucket+".*")...)
		// Revocations among the replicas: each ends its own connections
		// to a deleted conversation.
		p.Publish = append(p.Publish, subjects.GatewayRevocations)
		p.Subscribe = []string{subjects.GatewayRevocations}
		p.Publish = append(p.Publish, readBacklog()...)
		// server-info asks the room-agents what they listen with.
		p.Publish = append(p.Publish, rpc.VoiceAgentInfoSubject)
		// PUT /v1/settings: a person's voice, speed, language, time zone.
		p.Publish = append(p.Publish, subjects.System(protocol.TypeUserSettings))
		// DELETE /v1/timers/{id}: the person cancels a timer.
		p.Publish = append(p.Publish, subjects.System(protocol.TypeTimer))
	case RoomAgent:
		// The LiveKit edge: client envelopes from the data channel and on
		// the user's behalf (ControlStop, AudioChunk, Configuration),
		// playout records, ASR jobs; hears SpeechAudio on core NATS.
		p.Publish = []string{clientAll, serverAll, agent(protocol.TypeSentencePlayout), agent(protocol.TypeTurnEvent), subjects.AllASRJobs}
		// Speculative transcripts from the asr (core NATS).
		p.Subscribe = []string{subjects.AllAudioOut, subjects.AllSpecTranscripts}
		// Its micro service (rpc.VoiceAgentService) answers server-info.
		p.Subscribe = append(p.Subscribe, "$SRV.>")
		// Whether a call is open in a room it is in (the llm's timers).
		p.Subscribe = append(p.Subscribe, rpc.VoiceRoomSubjects)
		// Hands-free mode turned on or off (pkg/prefs), heard on core NATS.
		p.Subscribe = append(p.Subscribe, client(protocol.TypeConfiguration), subjects.System(protocol.TypeUserSettings))
		p.Responses = true
		p.Publish = append(p.Publish, consumeFiltered(bus.StreamConversations, serverAll)...)
		p.Publish = append(p.Publish, consume(bus.StreamDispatch)...)
		p.Publish = append(p.Publish, readBacklog()...)
	case ASR:
		// The final transcript becomes the user's UserMessage.
		// A speculative job's transcript goes to the room-agent and, as the
		// UserMessage it would become, to the llm, on core NATS.
		p.Publish = []string{server(protocol.TypeTranscription), server(protocol.TypeErrorMessage),
			client(protocol.TypeUserMessage), subjects.AllDeadLetters, subjects.AllSpecTranscripts, subjects.AllSpecPreempts}
		p.Publish = append(p.Publish, consume(bus.StreamASRJobs)...)
		p.Publish = append(p.Publish, lastOf(bus.StreamConversations, server(protocol.TypeTranscription), client(protocol.TypeUserMessage))...)
		p.Publish = append(p.Publish, lastOf(bus.StreamASRJobs, subjects.ASRJob("*"))...)
		// Languages changed (pkg/prefs), heard on core NATS.
		p.Subscribe = append(p.Subscribe, client(protocol.TypeConfiguration), subjects.System(protocol.TypeUserSettings))
	case LLM:
		// Answers; tool registrations and MCP server status on alicia.sys;
		// stops and configurations heard on core NATS.
		p.Publish = []string{serverAll,
			subjects.System(protocol.TypeToolRegistration), subjects.System(protocol.TypeMCPServerStatus),
			// Prompt versions: the seeds, promotions and rollbacks.
			subjects.System(protocol.TypePromptVersion),
			rpc.HistorySubject, rpc.AppliedSubject, rpc.MemorySearchSubject, rpc.MemoryPrefetchedPrefix + "*",
			streamAPI("CREATE", llmTurns), streamAPI("UPDATE", llmTurns), streamAPI("INFO", llmTurns)}
		p.Subscribe = []string{client(protocol.TypeControlStop), client(protocol.TypeConfiguration),
			// Preemptive answers: started on a speculative transcript,
			// cancelled by the room-agent's TurnEvent; their first
			// sentence is synthesised ahead by the tts.
			subjects.AllSpecPreempts, agent(protocol.TypeTurnEvent),
			// A promoted or rolled back prompt version serves at once.
			subjects.System(protocol.TypePromptVersion)}
		p.Publish = append(p.Publish, subjects.AllSpecSpeak)
		p.Publish = append(p.Publish, consume(llmTurns)...)
		// A replica stopping gives its partitions up at once (the turn
		// consumers pin one replica each; services/llm/internal/queue).
		p.Publish = append(p.Publish, "$JS.API.CONSUMER.UNPIN."+llmTurns+".>")
		p.Publish = append(p.Publish, consumeFiltered(bus.StreamSystem,
			subjects.System(protocol.TypeToolSetting), subjects.System(protocol.TypeMCPServerConfig),
			// The optimiser takes runs from SYSTEM and reports them.
			subjects.System(protocol.TypeOptimizationRun))...)
		p.Publish = append(p.Publish, subjects.System(protocol.TypeEliteOptions), subjects.DeadLetter(llmOptimize))
		p.Subscribe = append(p.Subscribe, subjects.OptimizeCancel)
		// Resuming a turn replays its conversation from the turn's
		// sequence (bus.Replay): reads by sequence.
		p.Publish = append(p.Publish, bySequence(bus.StreamConversations))
		p.Publish = append(p.Publish, lastOf(bus.StreamConversations, client(protocol.TypeConfiguration),
			client(protocol.TypeControlStop), server(protocol.TypeStartAnswer), serverAll)...)
		// In a cluster, LLM_TURNS sources CONVERSATIONS again at once after
		// a leader change: the llm hears both streams' leader elections and
		// asks LLM_TURNS's leader to step down when its source stalled
		// (services/llm/internal/queue.SourceWatch).
		p.Subscribe = append(p.Subscribe, leaderElected(bus.StreamConversations), leaderElected(llmTurns))
		p.Publish = append(p.Publish, "$JS.API.STREAM.LEADER.STEPDOWN."+llmTurns)
		// Turns running per user over every replica: leases in a bucket
		// (services/llm/internal/queue.Budget).
		p.Publish = append(p.Publish, keyValue(llmTurnLeases)...)
		// The judge: the ends of answers from the server envelopes (its
		// consumer reads them all and ignores the others), its
		// TurnJudgements on the agent subject, and its dead letters.
		p.Publish = append(p.Publish, consumeFiltered(bus.StreamConversations, serverAll)...)
		p.Publish = append(p.Publish, agent(protocol.TypeTurnJudgement), subjects.DeadLetter(llmJudge))
		// Titles: the same answer ends, ConversationUpdates on the server subject.
		p.Publish = append(p.Publish, subjects.DeadLetter(llmTitles))
		// Timers: set, cancelled and fired on alicia.sys.timer, heard by
		// every replica on core NATS; claimed by one replica in a bucket;
		// spoken when a room-agent says a call is open.
		p.Publish = append(p.Publish, subjects.System(protocol.TypeTimer), rpc.VoiceRoomSubjects)
		p.Subscribe = append(p.Subscribe, subjects.System(protocol.TypeTimer))
		p.Publish = append(p.Publish, keyValue(timerClaims)...)
	case TTS:
		// SpeechAudio on core NATS, one SentenceAudio record per sentence;
		// hears the turn's sentences, starts, stops and errors on core NATS.
		p.Publish = []string{subjects.AllAudioOut, agent(protocol.TypeSentenceAudio), server(protocol.TypeErrorMessage)}
		p.Subscribe = []string{client(protocol.TypeControlStop), server(protocol.TypeAssistantSentence),
			server(protocol.TypeStartAnswer), server(protocol.TypeErrorMessage),
			// First sentences of preemptive answers, synthesised ahead,
			// and their cancellation.
			subjects.AllSpecSpeak, agent(protocol.TypeTurnEvent),
			// Voices, speeds and languages changed (pkg/prefs).
			client(protocol.TypeConfiguration), subjects.System(protocol.TypeUserSettings)}
		// A turn's sentences and the stops after its start are read through
		// consumers filtered on the turn's subjects.
		p.Publish = append(p.Publish, consumeFiltered(bus.StreamConversations, server(protocol.TypeStartAnswer),
			server(protocol.TypeAssistantSentence), client(protocol.TypeControlStop))...)
		p.Publish = append(p.Publish, lastOf(bus.StreamConversations, server(protocol.TypeStartAnswer),
			agent(protocol.TypeSentenceAudio), client(protocol.TypeControlStop))...)
	case Memory:
		// The embedded MemoryAction and the memory_extraction prompt's
		// seed PromptVersion on alicia.sys, confirmations to the client;
		// serves memory.search and memory.action.
		p.Publish = []string{subjects.System(protocol.TypeMemoryAction),
			server(protocol.TypeMemoryConfirmation), server(protocol.TypeErrorMessage),
			subjects.AllDeadLetters, rpc.AppliedSubject, subjects.System(protocol.TypePromptVersion)}
		p.Subscribe = []string{rpc.MemorySearchSubject, rpc.MemoryActionSubject, rpc.MemoryPrefetchedPrefix + "*", "$SRV.>"}
		p.Responses = true
		// Heard on core NATS: the clients' UserMessages, whose memory
		// search starts when they are published (the turn's memory.search
		// takes it), and every MemoryAction persistence may apply, which
		// ends the prefetched searches of its user.
		p.Subscribe = append(p.Subscribe, client(protocol.TypeUserMessage), subjects.System(protocol.TypeMemoryAction),
			client(protocol.TypeMemoryAction), server(protocol.TypeMemoryAction), agent(protocol.TypeMemoryAction))
		// Client MemoryActions; final answers from the server envelopes
		// (the extraction consumer reads them all and ignores the others;
		// the service reads whole conversations from PostgreSQL anyway).
		p.Publish = append(p.Publish, consumeFiltered(bus.StreamConversations,
			client(protocol.TypeMemoryAction), serverAll)...)
	case Persistence:
		// Consumes everything stored; serves history.get and
		// persistence.applied; publishes nothing but dead letters, the
		// ErrorMessage that closes an answer a crash left open, and, to
		// the other persistence instances, how far it applied its
		// partitions.
		p.Publish = []string{subjects.AllDeadLetters, subjects.AllPersistenceProgress,
			// The sweep's end of an answer a crash left open.
			server(protocol.TypeErrorMessage)}
		p.Subscribe = []string{rpc.HistorySubject, rpc.AppliedSubject, "$SRV.>", subjects.AllPersistenceProgress}
		p.Responses = true
		p.Publish = append(p.Publish, consume(bus.StreamConversations, bus.StreamSystem)...)
		// How far it applied CONVERSATIONS, for the edges' backlog limit
		// (pkg/backlog): it creates the bucket and writes the report.
		p.Publish = append(p.Publish, keyValue(backlog.Bucket)...)
	default:
		return Permissions{}
	}
	// Every service: bus.Connect creates the shared streams that are
	// missing (a create with another configuration than the stream's is
	// refused by the server, so it changes nothing); only their owner,
	// bus.StreamsOwner, may update them. Purging or deleting one is the
	// operator's (Admin). JetStream answers (publish acks, API replies)
	// and request replies arrive on the connection's inbox.
	p.Publish = append(p.Publish, "$JS.API.INFO")
	for _, s := range bus.StreamNames() {
		p.Publish = append(p.Publish, streamAPI("CREATE", s), streamAPI("INFO", s))
		if service == bus.StreamsOwner {
			p.Publish = append(p.Publish, streamAPI("UPDATE", s))
		}
	}
	p.Subscribe = append(p.Subscribe, "_INBOX.>")
	p.Publish = dedupe(p.Publish)
	for _, d := range Durables() {
		if d.Owner != service && slices.Contains(p.Publish, "$JS.API.CONSUMER.MSG.NEXT."+d.Stream+".>") {
			p.PublishDeny = append(p.PublishDeny, others(d.Stream, d.Name)...)
		}
	}
	return p
}

// others is what using another service's durable consumer takes, denied:
// creating or updating it, reading, deleting, pulling from it and
// acknowledging its messages.
func others(stream, name string) []string {
	return []string{
		"$JS.API.CONSUMER.CREATE." + stream + "." + name,
		"$JS.API.CONSUMER.CREATE." + stream + "." + name + ".>",
		"$JS.API.CONSUMER.DURABLE.CREATE." + stream + "." + name,
		"$JS.API.CONSUMER.INFO." + stream + "." + name,
		"$JS.API.CONSUMER.DELETE." + stream + "." + name,
		"$JS.API.CONSUMER.MSG.NEXT." + stream + "." + name,
		"$JS.ACK." + stream + "." + name + ".>",
	}
}

func streamAPI(op, stream string) string { return "$JS.API.STREAM." + op + "." + stream }

// leaderElected is the JetStream advisory of a new leader of the stream.
func leaderElected(stream string) string { return "$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED." + stream }

// consume is what creating, reading, pulling from and acknowledging
// consumers (durable or ordered) with any filter on the streams takes.
func consume(streams ...string) []string {
	var out []string
	for _, s := range streams {
		out = append(out,
			"$JS.API.CONSUMER.CREATE."+s+".>",
			"$JS.API.CONSUMER.DURABLE.CREATE."+s+".>",
		)
		out = append(out, useConsumers(s)...)
	}
	return out
}

// consumeFiltered is consume with creating narrowed to consumers of any name
// whose one filter subject is one of filters: the create subject names the
// filter ($JS.API.CONSUMER.CREATE.<stream>.<consumer>.<filter>), and the
// server refuses a consumer whose filter differs from it. A filter granted
// with wildcards admits any filter its wildcards match (a * in the filter
// itself included).
func consumeFiltered(stream string, filters ...string) []string {
	var out []string
	for _, f := range filters {
		out = append(out, "$JS.API.CONSUMER.CREATE."+stream+".*."+f)
	}
	return append(out, useConsumers(stream)...)
}

// useConsumers is reading, deleting, pulling from and acknowledging the
// stream's consumers.
func useConsumers(stream string) []string {
	return []string{
		"$JS.API.CONSUMER.INFO." + stream + ".>",
		"$JS.API.CONSUMER.DELETE." + stream + ".>",
		"$JS.API.CONSUMER.MSG.NEXT." + stream + ".>",
		"$JS.ACK." + stream + ".>",
	}
}

// lastOf is reading the last message on a subject matching one of
// patterns from the stream: nats.go's GetLastMsgForSubject sends
// $JS.API.DIRECT.GET.<stream>.<subject> (the stream has AllowDirect), and
// the server answers that subject only with its last message.
func lastOf(stream string, patterns ...string) []string {
	var out []string
	for _, p := range patterns {
		out = append(out, "$JS.API.DIRECT.GET."+stream+"."+p)
	}
	return out
}

// keyValue is what a KeyValue bucket's Get, Put, Create and Delete take
// (nats.go's jetstream): creating, updating and reading its stream
// (CreateOrUpdateKeyValue, KeyValue), publishing on its keys (a put, a
// delete marker) and the direct get of one key's last entry. No consumer:
// watching and listing keys are not granted.
func keyValue(bucket string) []string {
	stream := "KV_" + bucket
	return []string{
		streamAPI("CREATE", stream), streamAPI("UPDATE", stream), streamAPI("INFO", stream),
		"$KV." + bucket + ".>",
		"$JS.API.DIRECT.GET." + stream + ".$KV." + bucket + ".>",
	}
}

// readBacklog is what an edge's backlog.Watcher takes: opening
// persistence's bucket of reports and reading CONVERSATIONS' report (the
// stream's own state is read with STREAM.INFO, granted to every service).
func readBacklog() []string {
	stream := "KV_" + backlog.Bucket
	return []string{streamAPI("INFO", stream),
		"$JS.API.DIRECT.GET." + stream + ".$KV." + backlog.Bucket + "." + backlog.KeyConversations}
}

// bySequence is reading messages of the stream by sequence
// (bus.Replay's batched direct gets): any message, the request's subject
// filter is in its body.
func bySequence(stream string) string { return "$JS.API.DIRECT.GET." + stream }

func dedupe(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
