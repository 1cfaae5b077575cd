package turn

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/sentence"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/services/llm/internal/demos"
	"github.com/alicia-voice/alicia/services/llm/internal/model"
	"github.com/alicia-voice/alicia/services/llm/internal/think"
)

// Preemptive answers. When the room-agent sees a silence begin, the asr
// transcribes the utterance so far and sends this service, on core NATS
// (subjects.SpecPreempt, one replica of the queue group), the UserMessage
// the transcript would become. The replica builds the answer's request as
// the turn will (the branch, memories, tools) and starts the model on it,
// keeping what streams in memory; nothing is published, stored or
// remembered. The first sentence goes to the tts (subjects.SpecSpeak),
// which synthesises it ahead and holds the audio.
//
// When the silence ends the turn, the UserMessage comes through the turn
// queue as usual and the turn runs as usual, except that its first model
// request, when it is the very request the preemptive answer made (same
// messages and tools, byte for byte), takes the stream already under way
// instead of asking the model again, and the memory search is not repeated.
// The record (UserMessage, StartAnswer, sentences) is exactly a normal
// turn's. If the user speaks again, the room-agent's TurnEvent
// preempt_cancelled (heard on core NATS) cancels it; one never confirmed
// expires. A turn taken by another replica cannot use it (it runs as
// usual, and this one expires).

// preemptTTL bounds how long a preemptive answer waits for its turn.
const preemptTTL = 20 * time.Second

// preemptGroup is the queue group of the llm replicas on SpecPreempt.
const preemptGroup = "llm"

// preempt is one answer started on a speculative transcript.
type preempt struct {
	cid, id, text string
	started       time.Time
	cancel        context.CancelFunc

	ready chan struct{} // closed when req and mems are set (or it failed before)
	mems  []rpc.Memory
	demos []demos.Demo
	fp    [32]byte // fingerprint of the request
	built bool

	mu      sync.Mutex
	deltas  []model.Delta
	more    chan struct{} // closed and replaced when deltas grow or the stream ends
	done    bool
	res     model.Result
	err     error
	adopted bool
}

type preempts struct {
	mu   sync.Mutex
	byID map[string]*preempt // cid + " " + message id
}

func newPreempts() *preempts { return &preempts{byID: map[string]*preempt{}} }

func preemptKey(cid, id string) string { return cid + " " + id }

// put registers p, replacing (and cancelling) an older one for the message.
func (ps *preempts) put(p *preempt) (replaced *preempt) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	k := preemptKey(p.cid, p.id)
	replaced = ps.byID[k]
	ps.byID[k] = p
	return replaced
}

// drop removes p if it is still registered.
func (ps *preempts) drop(p *preempt) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	k := preemptKey(p.cid, p.id)
	if ps.byID[k] != p {
		return false
	}
	delete(ps.byID, k)
	return true
}

func (ps *preempts) get(cid, id string) *preempt {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.byID[preemptKey(cid, id)]
}

// memories are the preemptive answer's memories when it searched with
// text.
func (ps *preempts) memories(cid, id, text string) ([]rpc.Memory, bool) {
	p := ps.get(cid, id)
	if p == nil || p.text != text {
		return nil, false
	}
	<-p.ready
	return p.mems, p.built
}

// demonstrations are the preemptive answer's demonstrations when it chose
// them for text.
func (ps *preempts) demonstrations(cid, id, text string) ([]demos.Demo, bool) {
	p := ps.get(cid, id)
	if p == nil || p.text != text {
		return nil, false
	}
	<-p.ready
	return p.demos, p.built
}

// onPreempt starts a preemptive answer (a SpecPreempt message).
func (e *Engine) onPreempt(base context.Context, env protocol.Envelope, um *protocol.UserMessage, in bus.Inbound) error {
	cid := um.ConversationID
	if cid != in.Conversation {
		return fmt.Errorf("a preemptive UserMessage of conversation %q on the subject of %q", cid, in.Conversation)
	}
	if strings.TrimSpace(um.Content) == "" {
		return nil // nothing to answer yet
	}
	ctx, cancel := context.WithCancel(telemetry.ExtractMeta(base, env.Meta))
	p := &preempt{cid: cid, id: um.ID, text: um.Content, started: time.Now(), cancel: cancel,
		ready: make(chan struct{}), more: make(chan struct{})}
	if old := e.preempts.put(p); old != nil {
		old.cancel()
		e.d.Metrics.Preempts.WithLabelValues("replaced").Inc()
	}
	// One never confirmed expires; an adopted one lives as long as its turn.
	time.AfterFunc(preemptTTL, func() {
		if !p.isAdopted() {
			cancel()
		}
	})
	userID, _ := env.Meta[edge.MetaUserID].(string)
	log := telemetry.ForConversation(e.d.Log, cid).With().Str("message_id", um.ID).Logger()
	go e.runPreempt(ctx, p, um, userID, log)
	return nil
}

// onTurnEvent cancels the preemptive answer a TurnEvent preempt_cancelled
// names.
func (e *Engine) onTurnEvent(_ context.Context, _ protocol.Envelope, ev *protocol.TurnEvent, in bus.Inbound) error {
	if ev.Kind != protocol.TurnEventKindPreemptCancelled || ev.UtteranceID == nil {
		return nil
	}
	cid := in.Conversation
	if pre := e.preempts.get(cid, *ev.UtteranceID); pre != nil && e.preempts.drop(pre) {
		pre.cancel()
		e.d.Metrics.Preempts.WithLabelValues("cancelled").Inc()
		e.d.Log.Debug().Str("conversation_id", cid).Str("message_id", pre.id).Dur("held", time.Since(pre.started)).Msg("preemptive answer cancelled")
	}
	return nil
}

// runPreempt builds the request and streams the answer into p.
func (e *Engine) runPreempt(ctx context.Context, p *preempt, um *protocol.UserMessage, userID string, log zerolog.Logger) {
	defer func() {
		<-ctx.Done()
		if e.preempts.drop(p) && !p.isAdopted() {
			e.d.Metrics.Preempts.WithLabelValues("expired").Inc()
		}
	}()
	req, err := e.preemptRequest(ctx, p, um, userID, log)
	if err != nil {
		close(p.ready)
		p.finish(model.Result{}, err)
		if ctx.Err() == nil {
			log.Debug().Err(err).Msg("preemptive answer not started")
		}
		return
	}
	b, _ := json.Marshal(req)
	p.fp, p.built = sha256.Sum256(b), true
	close(p.ready)

	speak := e.speaksAhead(ctx, p.cid)
	var first firstSentence
	res, err := e.d.Model.Stream(ctx, req, func(d model.Delta) {
		p.add(d)
		if speak {
			if s, ok := first.push(d); ok {
				e.speakAhead(p.cid, s, log)
			}
		}
	})
	if speak && err == nil {
		if s, ok := first.flush(); ok {
			e.speakAhead(p.cid, s, log)
		}
	}
	p.finish(res, err)
}

// preemptRequest is the first model request the turn of um would make:
// the branch as persistence has it now, the memories for its text, tools.
func (e *Engine) preemptRequest(ctx context.Context, p *preempt, um *protocol.UserMessage, userID string, log zerolog.Logger) (model.Request, error) {
	var minSeq uint64
	if info, err := e.d.Conversations.Info(ctx); err == nil {
		minSeq = info.State.LastSeq
	}
	var wg sync.WaitGroup
	wg.Go(func() { p.mems = e.searchMemories(ctx, log, userID, "", um.Content) }) // not published: nothing began its search
	wg.Go(func() { p.demos = e.demonstrations(ctx, log, userID, p.cid, um.Content) })
	hctx, cancel := context.WithTimeout(ctx, e.s.HistoryTimeout)
	defer cancel()
	resp, err := rpc.History(hctx, e.d.NC, rpc.HistoryRequest{ConversationID: p.cid, MinSequence: minSeq, Limit: e.s.HistoryLimit + 8})
	wg.Wait()
	if err != nil {
		return model.Request{}, err
	}
	hist := resp.Messages
	if i := indexOf(hist, um.ID); i >= 0 {
		return model.Request{}, errors.New("the message is stored already: its turn is under way")
	}
	if um.PreviousID != nil {
		j := indexOf(hist, *um.PreviousID)
		if j < 0 {
			return model.Request{}, errors.New("the message continues another branch")
		}
		hist = hist[:j+1]
	}
	// The versions the turn will choose: the same catalog, conversation, person and voice.
	feats, _ := e.features.get(ctx, p.cid)
	comp := e.compose(ctx, p.cid, userID, feats.audioOutput, p.demos)
	req := model.Request{Messages: e.prompt(comp.system, p.mems, p.started, e.location(ctx, userID), hist, "", um.Content, "")}
	if e.s.MaxToolIterations > 0 {
		req.Tools = comp.tools
	}
	return req, nil
}

// speaksAhead reports whether the conversation's answers are spoken.
func (e *Engine) speaksAhead(ctx context.Context, cid string) bool {
	f, err := e.features.get(ctx, cid)
	return err == nil && f.audioOutput && f.streaming
}

// speakAhead sends the preemptive answer's first sentence to the tts.
func (e *Engine) speakAhead(cid, text string, log zerolog.Logger) {
	env := protocol.New(cid, &protocol.AssistantSentence{ConversationID: cid, Sequence: 1, Text: text})
	b, err := protocol.Encode(env)
	if err == nil {
		err = e.d.NC.Publish(subjects.SpecSpeak(cid), b)
	}
	if err != nil {
		log.Warn().Err(err).Msg("send the first sentence ahead to the tts")
	}
}

func (p *preempt) add(d model.Delta) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.deltas = append(p.deltas, d)
	close(p.more)
	p.more = make(chan struct{})
}

func (p *preempt) finish(res model.Result, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.res, p.err, p.done = res, err, true
	close(p.more)
	p.more = make(chan struct{})
}

func (p *preempt) isAdopted() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.adopted
}

// stream is the model request of a turn: the preemptive answer's stream
// when it made exactly this request, else a request to the model.
func (t *turn) stream(ctx context.Context, round int, req model.Request, onDelta func(model.Delta)) (model.Result, error) {
	if round == 0 && t.p.userMsg != nil && t.p.kind == kindMessage {
		if p := t.e.preempts.get(t.cid, t.p.userMsg.ID); p != nil && t.e.preempts.drop(p) {
			if res, err, ok := t.adopt(ctx, p, req, onDelta); ok {
				return res, err
			}
		}
	}
	return t.e.d.Model.Stream(ctx, req, onDelta)
}

// adopt streams p's answer when its request is req; false: it was not
// (it is cancelled; the model is asked as usual).
func (t *turn) adopt(ctx context.Context, p *preempt, req model.Request, onDelta func(model.Delta)) (model.Result, error, bool) {
	<-p.ready
	b, _ := json.Marshal(req)
	if !p.built || p.text != t.p.userText || sha256.Sum256(b) != p.fp {
		p.cancel()
		t.e.d.Metrics.Preempts.WithLabelValues("mismatch").Inc()
		t.log.Info().Bool("built", p.built).Msg("preemptive answer not used: the turn's request differs")
		return model.Result{}, nil, false
	}
	p.mu.Lock()
	p.adopted = true
	p.mu.Unlock()
	t.e.d.Metrics.Preempts.WithLabelValues("used").Inc()
	t.log.Debug().Dur("ahead", time.Since(p.started)).Msg("answer taken from the preemptive one")
	defer p.cancel()
	for i := 0; ; {
		p.mu.Lock()
		ds, done, more, res, err := p.deltas[i:], p.done, p.more, p.res, p.err
		p.mu.Unlock()
		for _, d := range ds {
			onDelta(d)
		}
		i += len(ds)
		if done {
			if err != nil && ctx.Err() != nil {
				err = context.Cause(ctx)
			}
			return res, err, true
		}
		select {
		case <-more:
		case <-ctx.Done():
			return model.Result{}, context.Cause(ctx), true
		}
	}
}

// firstSentence finds an answer's first sentence as the turn's answer
// would publish it: reasoning left out, the same splitter.
type firstSentence struct {
	th     think.Filter
	split  *sentence.Splitter
	heldWS string
	found  bool
}

func (f *firstSentence) push(d model.Delta) (string, bool) {
	if f.found || d.Content == "" {
		return "", false
	}
	return f.text(f.th.Push(d.Content))
}

func (f *firstSentence) text(parts []think.Part) (string, bool) {
	if f.split == nil {
		f.split = sentence.New()
	}
	for _, p := range parts {
		if p.End || p.Reasoning {
			continue
		}
		s := f.heldWS + p.Text
		kept := strings.TrimRightFunc(s, unicode.IsSpace)
		f.heldWS = s[len(kept):]
		if kept == "" {
			continue
		}
		if out := f.split.Push(kept); len(out) > 0 {
			f.found = true
			return out[0], true
		}
	}
	return "", false
}

func (f *firstSentence) flush() (string, bool) {
	if f.found {
		return "", false
	}
	if s, ok := f.text(f.th.Flush()); ok {
		return s, true
	}
	if f.split == nil {
		return "", false
	}
	if rest := f.split.Flush(); len(rest) > 0 && rest[0] != "" {
		f.found = true
		return rest[0], true
	}
	return "", false
}
