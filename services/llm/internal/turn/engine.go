// Package turn is the llm's use case: one turn of a conversation. From a
// UserMessage or a ControlVariation taken off the turn queue it builds the
// context (system prompt, the branch's history, memories, tools), streams
// the model's answer as StartAnswer, AssistantSentences (or one
// AssistantMessage), ReasoningSteps, ToolUseRequest/Result and MemoryTraces,
// runs the tool loop, honours ControlStop at once, and reports a backend
// failure as ErrorMessage 503.
package turn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/services/llm/internal/metrics"
	"github.com/alicia-voice/alicia/services/llm/internal/model"
	"github.com/alicia-voice/alicia/services/llm/internal/prompts"
	"github.com/alicia-voice/alicia/services/llm/internal/queue"
	"github.com/alicia-voice/alicia/services/llm/internal/store"
	"github.com/alicia-voice/alicia/services/llm/internal/tools"
)

// Model streams chat completions (internal/model.Client).
type Model interface {
	Stream(ctx context.Context, req model.Request, onDelta func(model.Delta)) (model.Result, error)
}

// Toolbox is what the turn needs of the tool registry (internal/tools.Registry).
type Toolbox interface {
	Available(ctx context.Context) []tools.Spec
	Call(ctx context.Context, name string, inv tools.Invocation, args map[string]any) (any, error)
	Timeout(name string) time.Duration
}

// Messages reads messages from Postgres (internal/store.Reader).
type Messages interface {
	Message(ctx context.Context, cid, id string) (store.Message, error)
	Chain(ctx context.Context, cid, id string, limit int) ([]rpc.HistoryMessage, error)
	Siblings(ctx context.Context, cid, parent string) ([]string, error)
}

// Deps are the engine's collaborators.
type Deps struct {
	NC            *nats.Conn
	Conversations jetstream.Stream // CONVERSATIONS, for direct gets
	Publisher     *bus.Publisher
	Model         Model
	Toolbox       Toolbox // nil: no tools
	Messages      Messages
	// Prompts are the prompt versions (nil: none, an empty system prompt).
	Prompts *prompts.Catalog
	// Demonstrations chooses the person's earlier well-rated turns shown
	// as examples (nil: none).
	Demonstrations Demonstrations
	Metrics        *metrics.Metrics
	Log            zerolog.Logger
	// Zones gives the person's time zone, in which the model is told the
	// time (nil: UTC).
	Zones Zones
}

// Zones tells a person's time zone (internal/timers.Scheduler).
type Zones interface {
	Location(ctx context.Context, userID string) *time.Location
}

// Settings tune a turn.
type Settings struct {
	MaxToolIterations int
	HistoryLimit      int // messages of the branch sent to the model
	HistoryTimeout    time.Duration
	MemoryTopK        int
	MemoryThreshold   float64
	MemoryTimeout     time.Duration
	// DemonstrationsTimeout bounds choosing the demonstrations: past it
	// the turn goes on without.
	DemonstrationsTimeout time.Duration
	PublishTimeout        time.Duration
	ToolResultMax         int // bytes of a tool result given to the model
}

// Engine runs turns. Its methods are safe for concurrent use.
type Engine struct {
	d        Deps
	s        Settings
	stops    *stops
	features *features
	branches *branches
	preempts *preempts
	// base is the parent of work no turn started (preemptive answers):
	// Listen's context without its end (its values: the service's mark).
	base context.Context
}

// New returns an engine.
func New(d Deps, s Settings) *Engine {
	if d.Prompts == nil {
		d.Prompts = prompts.NewCatalog(nil)
	}
	return &Engine{d: d, s: s, stops: newStops(), features: newFeatures(d.Conversations), branches: newBranches(10000, 30*time.Minute), preempts: newPreempts(),
		base: context.Background()}
}

// Listen subscribes, on core NATS, to every conversation's ControlStop (a
// stop must not wait behind queued data) and Configuration (to forget the
// cached features), to the preemptive answers (one replica of the queue
// group each) and to the TurnEvents that cancel them. Every replica
// listens; the one running the turn acts. The preemptive answers it starts
// carry ctx's values (the service's tracing mark under alicia up), not its
// end: they end as they did before.
func (e *Engine) Listen(ctx context.Context) (unsubscribe func(), err error) {
	e.base = context.WithoutCancel(ctx)
	subs, err := e.routes().Subscribe(e.base, e.d.NC)
	if err != nil {
		return nil, fmt.Errorf("turn: %w", err)
	}
	return subs.Close, nil
}

// routes is the llm's core-NATS route table.
func (e *Engine) routes() *bus.Routes {
	rt := bus.NewRoutes("llm", e.d.Log)
	bus.On(rt, "control_stop", subjects.AllOfType(subjects.OriginClient, protocol.TypeControlStop), e.onStop, bus.ConversationSubject())
	bus.On(rt, "configuration", subjects.AllOfType(subjects.OriginClient, protocol.TypeConfiguration),
		func(_ context.Context, _ protocol.Envelope, _ *protocol.Configuration, in bus.Inbound) error {
			e.features.forget(in.Conversation)
			return nil
		}, bus.ConversationSubject())
	bus.On(rt, "preempt", subjects.AllSpecPreempts, e.onPreempt, bus.Queue(preemptGroup), bus.SpecSubject())
	bus.On(rt, "turn_event", subjects.AllOfType(subjects.OriginAgent, protocol.TypeTurnEvent), e.onTurnEvent, bus.ConversationSubject())
	// A promoted or rolled back prompt version serves the next turn (the
	// catalog also reloads from Postgres once persistence applied it).
	bus.On(rt, "prompt_version", subjects.System(protocol.TypePromptVersion),
		func(_ context.Context, _ protocol.Envelope, pv *protocol.PromptVersion, _ bus.Inbound) error {
			e.d.Prompts.Apply(pv)
			return nil
		})
	return rt
}

func (e *Engine) onStop(_ context.Context, _ protocol.Envelope, stop *protocol.ControlStop, in bus.Inbound) error {
	cid := in.Conversation
	speech := stop.StopType != nil && *stop.StopType == protocol.ControlStopStopTypeSpeech
	if speech {
		// A barge-in: the room-agent records which sentences the user heard
		// (SentencePlayout, before the user's next message) and persistence
		// cuts the answer's contents to them, so the branch this replica
		// remembers is stale; the next turn reads history.get.
		e.branches.cut(cid)
	}
	// Every stop type ends the generation: a barge-in drops the turn's
	// remaining work too; what was said stays.
	if e.stops.stop(cid, stop.TargetID, speech) {
		e.d.Log.Debug().Str("conversation_id", cid).Bool("speech", speech).Msg("turn stopped")
	}
	return nil
}

// Handle runs one turn taken off the queue (a queue.Handler).
func (e *Engine) Handle(ctx context.Context, q queue.Turn) error {
	switch b := q.Env.Body.(type) {
	case *protocol.UserMessage:
		return e.answerMessage(ctx, q, b)
	case *protocol.ControlVariation:
		return e.vary(ctx, q, b)
	}
	return nil
}

// GiveUp tells the client a turn could not be done (a queue GiveUp hook).
func (e *Engine) GiveUp(ctx context.Context, q queue.Turn, err error) {
	e.d.Metrics.Errors.WithLabelValues("internal").Inc()
	origin := assistantID(q)
	env := errorEnvelope(q.ConversationID, origin, protocol.CodeInternal, true,
		"The assistant could not answer this message because of an internal error.")
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.s.PublishTimeout)
	defer cancel()
	if _, perr := e.d.Publisher.PublishServer(pctx, env, origin+":err"); perr != nil {
		e.d.Log.Error().Err(perr).Str("conversation_id", q.ConversationID).Msg("cannot report a failed turn")
	}
	_ = err
}

// assistantID names the answer of a turn: derived from the turn envelope's
// stream sequence, so whichever replica (re)does the turn uses the same id.
func assistantID(q queue.Turn) string { return protocol.AnswerID(q.ConversationID, q.Sequence) }

func errorEnvelope(cid, origin string, code int32, recoverable bool, msg string) protocol.Envelope {
	e := &protocol.ErrorMessage{ID: protocol.DeriveID("aerr", cid, origin, code), ConversationID: cid, Code: code,
		Message: msg, Severity: 2, Recoverable: recoverable}
	if origin != "" {
		e.OriginatingID = &origin
	}
	return protocol.New(cid, e)
}

// lastAnswerSequence is the CONVERSATIONS sequence of the conversation's
// last StartAnswer (0 when there is none).
func (e *Engine) lastAnswerSequence(ctx context.Context, cid string) (uint64, error) {
	m, err := e.d.Conversations.GetLastMsgForSubject(ctx, subjects.Server(cid, protocol.TypeStartAnswer))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return m.Sequence, nil
}

// lastServerSequence is the CONVERSATIONS sequence of the conversation's
// last server envelope: the previous turn's last word, which a turn queued
// behind it must see applied before reading the history. neutral reports
// that envelope cannot have changed the branch (a transcription of the
// user's speech, the answer to a Configuration).
func (e *Engine) lastServerSequence(ctx context.Context, cid string) (seq uint64, neutral bool, err error) {
	m, err := e.d.Conversations.GetLastMsgForSubject(ctx, subjects.ServerAll(cid))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	p, perr := subjects.Parse(m.Subject)
	neutral = perr == nil && (p.TypeToken == protocol.TypeTranscription.Token() || p.TypeToken == protocol.TypeConfiguration.Token())
	return m.Sequence, neutral, nil
}
