package turn

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	openai "github.com/sashabaranov/go-openai"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/services/llm/internal/demos"
)

// continueInstruction asks the model to go on from an answer it started.
const continueInstruction = "Continue your previous answer exactly where it stopped. Do not repeat anything you already said and do not comment on the continuation."

func subjectControlStop(cid string) string { return subjects.Client(cid, protocol.TypeControlStop) }

// prefetch is what the context needs, asked for as soon as the turn starts
// and at the same time: the branch as persistence has it once everything
// before the message is applied, and the memories.
type prefetch struct {
	wg   sync.WaitGroup
	resp rpc.HistoryResponse
	err  error
	mems []rpc.Memory
	// demos are the turn's demonstrations, set when demosReady closes.
	demos      []demos.Demo
	demosReady chan struct{}
	// cached: history.get was not asked, the remembered branch may serve.
	cached bool
	// loc is the person's time zone.
	loc *time.Location
}

func (t *turn) startPrefetch() *prefetch {
	pf := &prefetch{demosReady: make(chan struct{})}
	if um := t.p.userMsg; um != nil {
		if head, ok := t.e.branches.head(t.cid); ok && (um.PreviousID == nil || *um.PreviousID == head) {
			pf.cached = true
		}
	}
	if t.p.userMsg != nil && !pf.cached {
		pf.wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.ctx, t.e.s.HistoryTimeout)
			defer cancel()
			pf.resp, pf.err = t.history(ctx, t.q.Sequence-1)
		})
	}
	pf.wg.Go(func() { pf.mems = t.memories() })
	pf.wg.Go(func() { pf.loc = t.e.location(t.ctx, t.userID) })
	pf.wg.Go(func() { defer close(pf.demosReady); pf.demos = t.demonstrations() })
	return pf
}

// buildContext returns the prompt. Memories used are announced with
// MemoryTraces.
func (t *turn) buildContext(pf *prefetch) ([]openai.ChatCompletionMessage, error) {
	pf.wg.Wait()
	hist, mems := t.p.history, pf.mems
	if t.p.userMsg != nil {
		var err error
		if hist, err = t.userHistory(pf); err != nil {
			return nil, err
		}
		t.hist = hist
	}
	for _, m := range mems {
		tr := &protocol.MemoryTrace{ID: protocol.DeriveID("amu", t.p.assistantID, m.ID), MessageID: t.p.assistantID,
			ConversationID: t.cid, MemoryID: m.ID, Content: m.Content, Relevance: clamp01(m.Similarity)}
		if m.Query != nil { // which search found it (rpc.MemoryQuery)
			tr.QueryPrompt, tr.QueryPromptMeta = &m.Query.Text, m.Query.Meta()
		}
		t.out.send(protocol.New(t.cid, tr), t.p.assistantID+":m:"+m.ID)
	}
	return t.e.prompt(t.comp.system, mems, t.promptTime(), pf.loc, hist, t.p.assistantID, t.p.userText, t.ans.prefixText()), nil
}

// promptTime is the time the model is told: a preemptive answer's to the
// same message and text, so the turn's request can still equal its request
// across a minute's turn; else now.
func (t *turn) promptTime() time.Time {
	if um := t.p.userMsg; um != nil {
		if p := t.e.preempts.get(t.cid, um.ID); p != nil && p.text == t.p.userText {
			return p.started
		}
	}
	return time.Now()
}

// prompt assembles the model's messages: the system text (the versions
// serving the turn: versions.go) with the memories, the branch (without answer skip, failed answers and empty
// messages), the user's text, and a continuation's prefix. A preemptive
// answer (preempt.go) is built by the same function, so the confirmed
// turn's request can be compared with it.
func (e *Engine) prompt(system string, mems []rpc.Memory, now time.Time, loc *time.Location, hist []rpc.HistoryMessage, skip, userText, prefix string) []openai.ChatCompletionMessage {
	msgs := []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleSystem, Content: systemPrompt(system, mems, now, loc)}}
	for _, h := range hist {
		if h.ID == skip || h.CompletionStatus == "failed" || strings.TrimSpace(h.Contents) == "" {
			continue // only what the user saw: failed answers are left out
		}
		switch h.Role {
		case "user":
			msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: h.Contents})
		case "assistant":
			msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: h.Contents})
		}
	}
	msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: userText})
	if prefix != "" {
		msgs = append(msgs,
			openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: prefix},
			openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: continueInstruction})
	}
	return msgs
}

// systemPrompt is the system text, the person's local time (for the timer
// tools and any question about dates) and the memories.
func systemPrompt(system string, mems []rpc.Memory, now time.Time, loc *time.Location) string {
	if loc == nil {
		loc = time.UTC
	}
	var b strings.Builder
	b.WriteString(system)
	b.WriteString("\n\nIt is now ")
	b.WriteString(now.In(loc).Format("Monday, 2 January 2006, 15:04"))
	b.WriteString(" in the user's time zone, ")
	b.WriteString(loc.String())
	b.WriteString(" (UTC")
	b.WriteString(now.In(loc).Format("-07:00"))
	b.WriteString(").")
	if len(mems) > 0 {
		b.WriteString("\n\nWhat you remember about the user from earlier conversations (use it only when it helps):")
		for _, m := range mems {
			b.WriteString("\n- ")
			b.WriteString(strings.ReplaceAll(m.Content, "\n", " "))
		}
	}
	return b.String()
}

// userHistory is the branch the user message continues: the one this
// replica remembers when it is still current, else read through history.get.
func (t *turn) userHistory(pf *prefetch) ([]rpc.HistoryMessage, error) {
	if !pf.cached {
		return t.branchHistory(pf.resp, pf.err)
	}
	// The remembered branch holds when no other answer started since and
	// whatever came last on the server side was this replica's own answer or
	// cannot have changed the branch.
	if msgs, ok := t.e.branches.branch(t.cid, t.lastAnswer, t.lastServer, t.lastNeutral, t.q.Sequence); ok {
		return msgs, nil
	}
	ctx, cancel := context.WithTimeout(t.ctx, t.e.s.HistoryTimeout)
	defer cancel()
	resp, err := t.history(ctx, t.q.Sequence-1)
	return t.branchHistory(resp, err)
}

// branchHistory is the branch the user message continues, read through
// history.get once persistence has applied everything before the message and
// everything the conversation's previous turn published (read-your-writes
// without waiting for the message itself). resp is the prefetched branch.
func (t *turn) branchHistory(resp rpc.HistoryResponse, err error) ([]rpc.HistoryMessage, error) {
	ctx, cancel := context.WithTimeout(t.ctx, t.e.s.HistoryTimeout)
	defer cancel()
	if err == nil && resp.AppliedSequence < t.minSeq {
		// The previous turn published after the message came: wait for it too.
		resp, err = t.history(ctx, t.minSeq)
	}
	if err != nil {
		return nil, err
	}
	um := t.p.userMsg
	msgs := resp.Messages
	if i := indexOf(msgs, um.ID); i >= 0 {
		return msgs[:i], nil
	}
	parent := ""
	switch {
	case um.PreviousID != nil:
		parent = *um.PreviousID
	case resp.AppliedSequence >= t.q.Sequence:
		// The message is applied but not on the current branch (an answer to
		// an earlier message moved the head): find where it was chained.
		m, err := t.e.d.Messages.Message(ctx, t.cid, um.ID)
		if err != nil {
			return nil, err
		}
		if m.PreviousID == nil {
			return nil, nil
		}
		parent = *m.PreviousID
	default:
		return msgs, nil // it will be chained to the head we read
	}
	if j := indexOf(msgs, parent); j >= 0 {
		return msgs[:j+1], nil
	}
	return t.e.d.Messages.Chain(ctx, t.cid, parent, t.e.s.HistoryLimit)
}

// history calls history.get, riding out a persistence restart within ctx.
func (t *turn) history(ctx context.Context, minSeq uint64) (rpc.HistoryResponse, error) {
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		resp, err := rpc.History(ctx, t.e.d.NC, rpc.HistoryRequest{ConversationID: t.cid, MinSequence: minSeq, Limit: t.e.s.HistoryLimit + 8})
		if err == nil {
			return resp, nil
		}
		retry := errors.Is(err, rpc.ErrNoResponders) || rpc.IsCode(err, rpc.CodeTimeout) || rpc.IsCode(err, rpc.CodeUnavailable)
		if !retry || ctx.Err() != nil {
			t.e.d.Metrics.Errors.WithLabelValues("history").Inc()
			return resp, err
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			t.e.d.Metrics.Errors.WithLabelValues("history").Inc()
			return resp, err
		}
	}
}

// memories asks memory.search for what is known about the user; without
// the memory service the turn goes on without memories.
func (t *turn) memories() []rpc.Memory {
	if um := t.p.userMsg; um != nil {
		// A preemptive answer to this message searched with the same text.
		if mems, ok := t.e.preempts.memories(t.cid, um.ID, t.p.userText); ok {
			return mems
		}
	}
	msgID := ""
	if um := t.p.userMsg; um != nil {
		msgID = um.ID // the memory replica that began its search answers
	}
	return t.e.searchMemories(t.ctx, t.log, t.userID, msgID, t.p.userText)
}

// demonstrations chooses the turn's demonstrations (demos.go), or takes
// those a preemptive answer to the same message and text chose.
func (t *turn) demonstrations() []demos.Demo {
	if um := t.p.userMsg; um != nil {
		if ds, ok := t.e.preempts.demonstrations(t.cid, um.ID, t.p.userText); ok {
			return ds
		}
	}
	return t.e.demonstrations(t.ctx, t.log, t.userID, t.cid, t.p.userText)
}

// searchMemories asks memory.search for what is known about the user
// (through the replica that began the search when user message msgID was
// published, when msgID is not ""); without the memory service the answer
// goes on without memories.
func (e *Engine) searchMemories(ctx context.Context, log zerolog.Logger, userID, msgID, text string) []rpc.Memory {
	if userID == "" || strings.TrimSpace(text) == "" || e.s.MemoryTopK <= 0 {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, e.s.MemoryTimeout)
	defer cancel()
	resp, err := rpc.MemorySearchFor(sctx, e.d.NC, msgID, rpc.MemorySearchRequest{UserID: userID, Query: text,
		TopK: e.s.MemoryTopK, Threshold: e.s.MemoryThreshold})
	if err != nil {
		if ctx.Err() == nil {
			log.Warn().Err(err).Msg("memory search unavailable; answering without memories")
		}
		return nil
	}
	if !resp.Enabled {
		return nil
	}
	return resp.Memories[:min(len(resp.Memories), e.s.MemoryTopK)]
}

// location is the person's time zone (UTC when unknown).
func (e *Engine) location(ctx context.Context, userID string) *time.Location {
	if e.d.Zones == nil {
		return time.UTC
	}
	return e.d.Zones.Location(ctx, userID)
}

func indexOf(msgs []rpc.HistoryMessage, id string) int {
	return slices.IndexFunc(msgs, func(m rpc.HistoryMessage) bool { return m.ID == id })
}

func clamp01(f float64) float64 { return min(max(f, 0), 1) }
