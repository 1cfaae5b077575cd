package turn

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/services/llm/internal/model"
	"github.com/alicia-voice/alicia/services/llm/internal/queue"
)

var tracer = otel.Tracer("github.com/alicia-voice/alicia/services/llm")

// Turn kinds (metrics label, log field).
const (
	kindMessage    = "message"
	kindRegenerate = "regenerate"
	kindEdit       = "edit"
	kindContinue   = "continue"
)

// plan is what a turn answers, and from what.
type plan struct {
	kind        string
	assistantID string
	parentID    string // StartAnswer.previousId: the user message answered
	userText    string // that message's text (also the memory query)
	// userMsg is set for a UserMessage turn: its history is the branch read
	// through history.get. Variations give the history directly.
	userMsg *protocol.UserMessage
	history []rpc.HistoryMessage
	// prefix is text the answer starts with (continue): published as its
	// first sentence, and the model is asked to go on from it.
	prefix string
	// branchParent, when set, gets a BranchUpdate naming the new answer at the end.
	branchParent string
	edit         *editSpec
}

// turn is one turn being run.
type turn struct {
	e      *Engine
	q      queue.Turn
	p      plan
	cid    string
	userID string
	log    zerolog.Logger
	ctx    context.Context // ends on stop or shutdown
	run    *running
	out    *outbox
	ans    *answer
	start  time.Time
	// attempt tells this try's tool and reasoning ids from a crashed try's.
	attempt uint64
	// minSeq is what persistence must have applied before the history is
	// read: everything before the message and the previous turn's last word.
	minSeq uint64
	// lastServer is the conversation's last server envelope when the turn
	// started; lastNeutral: it cannot have changed the branch.
	lastServer    uint64
	lastNeutral   bool
	lastAnswer    uint64 // the conversation's last StartAnswer before this turn's (read when a branch is remembered)
	lastPublished atomic.Uint64
	// startSeq is the sequence of this turn's StartAnswer.
	startSeq atomic.Uint64
	// hist is the branch the answer was built on (a UserMessage turn).
	hist []rpc.HistoryMessage
	// feats are the client's features (streaming, spoken answer).
	feats clientFeatures
	// comp is the prompt versions serving the turn.
	comp composed
	// gen is the conversation's cut generation when the turn started (see
	// branches): a barge-in since then and the branch is not remembered.
	gen uint64

	firstSentence sync.Once
	started       atomic.Bool // StartAnswer is in JetStream
}

// run does a planned turn. nil means the turn is over (answered, stopped,
// or reported to the client as failed); an error gives it back to the queue.
func (e *Engine) run(ctx context.Context, q queue.Turn, p plan) (err error) {
	start := time.Now()
	cid := q.ConversationID
	log := telemetry.ForConversation(e.d.Log, cid).With().Str("turn_id", p.assistantID).Str("kind", p.kind).Logger()
	ctx = telemetry.ExtractMeta(ctx, q.Env.Meta)
	ctx, span := tracer.Start(ctx, "llm.turn", trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		attribute.String("alicia.conversation_id", cid), attribute.String("alicia.turn_id", p.assistantID),
		attribute.String("alicia.turn_kind", p.kind), attribute.Int64("alicia.delivery", int64(q.Delivered))))
	outcome := "completed"
	defer func() {
		if err != nil {
			outcome = "retry"
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.SetAttributes(attribute.String("alicia.outcome", outcome))
		span.End()
		e.d.Metrics.TurnDuration.WithLabelValues(p.kind, outcome).Observe(time.Since(start).Seconds())
		log.Info().Str("outcome", outcome).Dur("took", time.Since(start)).Dur("queued", start.Sub(q.Queued)).Uint64("delivery", q.Delivered).Msg("turn")
	}()

	tctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r := e.stops.begin(cid, p.assistantID, cancel)
	defer e.stops.end(cid, r)
	if e.stoppedBeforeStart(ctx, q) {
		outcome = "skipped"
		return nil
	}
	userID, _ := q.Env.Meta[edge.MetaUserID].(string)
	t := &turn{e: e, q: q, p: p, cid: cid, userID: userID, log: log, ctx: tctx, run: r, start: start, attempt: q.Delivered,
		gen: e.branches.generation(cid)}
	pf := t.startPrefetch()
	defer func() { cancel(nil); pf.wg.Wait() }()
	// Read before this turn publishes anything: the conversation's last
	// server envelope. Before the message: the history must include it.
	// After it: the previous turn published it after the message came, or an
	// earlier try of this turn did (its ack was lost).
	last, neutral, lerr := e.lastServerSequence(tctx, cid)
	if lerr != nil {
		log.Warn().Err(lerr).Msg("last server envelope unknown")
	}
	t.minSeq = max(q.Sequence-1, last)
	t.lastServer, t.lastNeutral = last, neutral
	if pf.cached { // the remembered branch may serve: which answer came last, before this one starts
		if t.lastAnswer, lerr = e.lastAnswerSequence(tctx, cid); lerr != nil {
			t.lastAnswer = 0 // unknown: read the history
		}
	}
	feats, ferr := e.features.get(tctx, cid)
	if ferr != nil {
		log.Warn().Err(ferr).Msg("client features unknown; streaming text")
	}
	t.feats = feats
	t.ans = newAnswer(t, feats.streaming)
	t.ans.startWith(p.prefix)
	if q.Delivered > 1 || last > q.Sequence {
		done, err := t.resume()
		if err != nil {
			return t.end(err)
		}
		if done {
			outcome = "already_done"
			return nil
		}
	}
	// Publishing outlives a stop (what was said stays said) but not a shutdown.
	t.out = newOutbox(ctx, e.d.Publisher, e.s.PublishTimeout, t.published)
	outcome, err = t.answer(pf)
	t.rememberBranch(outcome)
	return err
}

// rememberBranch keeps the branch after a completed answer to a message, so
// the conversation's next turn need not wait for persistence; anything else
// forgets it.
func (t *turn) rememberBranch(outcome string) {
	last, started := t.lastPublished.Load(), t.startSeq.Load()
	if outcome != "completed" || t.p.kind != kindMessage || t.p.userMsg == nil || t.p.branchParent != "" || last == 0 || started == 0 {
		t.e.branches.forget(t.cid)
		return
	}
	now := time.Now()
	msgs := make([]rpc.HistoryMessage, 0, len(t.hist)+2)
	msgs = append(msgs, t.hist...)
	msgs = append(msgs,
		rpc.HistoryMessage{ID: t.p.userMsg.ID, Role: "user", Contents: t.p.userText, CompletionStatus: "completed", CreatedAt: now},
		rpc.HistoryMessage{ID: t.p.assistantID, PreviousID: t.p.userMsg.ID, Role: "assistant", Contents: t.ans.content(), CompletionStatus: "completed", CreatedAt: now})
	if n := t.e.s.HistoryLimit; len(msgs) > n {
		msgs = msgs[len(msgs)-n:]
	}
	t.e.branches.remember(t.cid, t.gen, last, started, msgs)
}

// stoppedBeforeStart: an untargeted ControlStop that arrived here while no
// turn of the conversation was running, and was published after this turn's
// message, stops it before it starts.
func (e *Engine) stoppedBeforeStart(ctx context.Context, q queue.Turn) bool {
	if !e.stops.recentUntargeted(q.ConversationID) {
		return false
	}
	m, err := e.d.Conversations.GetLastMsgForSubject(ctx, subjectControlStop(q.ConversationID))
	return err == nil && m.Sequence > q.Sequence
}

// answer streams the answer and reports how the turn ended.
func (t *turn) answer(pf *prefetch) (outcome string, err error) {
	if t.p.edit != nil {
		t.sendEdit(t.p.edit)
	}
	// The demonstrations decide whether their version is named: wait for
	// them (at most ALICIA_LLM_DEMONSTRATIONS_TIMEOUT, while the history is
	// read).
	<-pf.demosReady
	t.comp = t.e.compose(t.ctx, t.cid, t.userID, t.feats.audioOutput, pf.demos)
	t.out.send(protocol.New(t.cid, &protocol.StartAnswer{ID: t.p.assistantID, PreviousID: t.p.parentID,
		ConversationID: t.cid, AnswerType: protocol.Ptr(t.feats.answerType()), PromptVersions: t.comp.ids}), t.p.assistantID+":start")
	msgs, err := t.buildContext(pf)
	if err == nil {
		err = t.generate(msgs)
	}
	if err == nil {
		t.ans.finish()
		if t.p.branchParent != "" {
			t.branchUpdate(t.p.branchParent, t.p.assistantID, t.ans.content())
		}
	}
	return t.finish(err)
}

// finish settles the turn after the answer ended with err.
func (t *turn) finish(err error) (string, error) {
	switch {
	case err == nil:
		return "completed", t.end(t.out.close())
	case t.run.stopped.Load():
		t.out.halt()
		perr := t.out.close()
		if !t.run.targeted.Load() && t.started.Load() {
			// A stop without a target does not tell persistence which answer
			// it cut: name it, so the row is completed with what was said.
			stopType, reason := protocol.ControlStopStopTypeGeneration, "stopped by the client"
			if t.run.speech.Load() {
				stopType, reason = protocol.ControlStopStopTypeSpeech, "the user spoke over the answer"
			}
			t.sendDirect(protocol.New(t.cid, &protocol.ControlStop{ConversationID: t.cid, TargetID: &t.p.assistantID,
				StopType: protocol.Ptr(stopType), Reason: protocol.Ptr(reason)}), t.p.assistantID+":stop")
		}
		if perr != nil {
			t.log.Warn().Err(perr).Msg("publish failed before the stop")
		}
		return "stopped", nil
	case t.ctx.Err() != nil:
		_ = t.out.close()
		return "shutdown", context.Cause(t.ctx)
	case errors.Is(err, model.ErrUnavailable):
		t.e.d.Metrics.Errors.WithLabelValues("backend_unavailable").Inc()
		t.log.Warn().Err(err).Msg("model backend unavailable")
		t.out.send(errorEnvelope(t.cid, t.p.assistantID, protocol.CodeBackendUnavailable, true,
			"The language model backend is unavailable right now; please try again in a moment."), t.p.assistantID+":err")
		return "failed", t.end(t.out.close())
	case errors.Is(err, model.ErrRejected):
		t.e.d.Metrics.Errors.WithLabelValues("rejected").Inc()
		t.log.Error().Err(err).Msg("model backend rejected the request")
		t.out.send(errorEnvelope(t.cid, t.p.assistantID, protocol.CodeInternal, true,
			"The language model backend rejected the request."), t.p.assistantID+":err")
		return "failed", t.end(t.out.close())
	}
	t.e.d.Metrics.Errors.WithLabelValues("internal").Inc()
	_ = t.out.close()
	return "retry", t.end(err)
}

func (t *turn) end(err error) error {
	if err != nil {
		return fmt.Errorf("turn %s: %w", t.p.assistantID, err)
	}
	return nil
}

// sendDirect publishes outside the outbox (after it is closed).
func (t *turn) sendDirect(env protocol.Envelope, msgID string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), t.e.s.PublishTimeout)
	defer cancel()
	if _, err := t.e.d.Publisher.PublishServer(ctx, env, msgID); err != nil {
		t.log.Warn().Err(err).Stringer("type", env.Type).Msg("publish failed")
	}
}

// published is told every envelope the outbox got into JetStream.
func (t *turn) published(env protocol.Envelope, ack *jetstream.PubAck) {
	if ack != nil {
		t.lastPublished.Store(ack.Sequence)
	}
	if env.Type == protocol.TypeStartAnswer {
		t.started.Store(true)
		if ack != nil {
			t.startSeq.Store(ack.Sequence)
		}
	}
	if env.Type == protocol.TypeAssistantSentence || env.Type == protocol.TypeAssistantMessage {
		t.firstSentence.Do(func() { t.e.d.Metrics.FirstSentence.Observe(time.Since(t.start).Seconds()) })
	}
}
