package turn

import (
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/sentence"
	"github.com/alicia-voice/alicia/services/llm/internal/model"
	"github.com/alicia-voice/alicia/services/llm/internal/think"
)

// answer turns the model's deltas into the envelopes the client gets:
// reasoning (reasoning_content and <think> blocks) into ReasoningSteps, one
// per paragraph; the answer text into AssistantSentences as soon as each
// sentence is complete, or, for a client that does not stream, into one
// AssistantMessage at the end. It runs on the turn's goroutine.
type answer struct {
	t         *turn
	streaming bool
	split     *sentence.Splitter
	think     think.Filter

	// heldWS is whitespace at the end of the text so far, kept from the
	// splitter until more text follows: the splitter then always holds the
	// last sentence until the end, so it goes out marked final.
	heldWS    string
	pushed    bool     // text went into the splitter
	seq       int32    // sentences published
	published []string // their texts: the contents persistence assembles
	// prefix is the start of the answer that is already known: a continued
	// answer's old text (not yet published, held until the next sentence)
	// or, when a crashed try is resumed, the sentences it published.
	prefix        string
	prefixPending bool

	rounds    []string // non-streaming: the answer text of each model request
	round     strings.Builder
	reasoning strings.Builder
	rseq      int32
	// reasoningField: the reasoning being gathered came in reasoning_content.
	reasoningField bool

	firstToken bool
}

func newAnswer(t *turn, streaming bool) *answer {
	return &answer{t: t, streaming: streaming, split: sentence.New()}
}

// startWith makes the answer begin with text not yet published (continue).
func (a *answer) startWith(text string) {
	a.prefix, a.prefixPending = strings.TrimSpace(text), true
	if a.prefix == "" {
		a.prefixPending = false
	}
}

// resumeAfter records what a crashed try already published.
func (a *answer) resumeAfter(sentences []string) {
	a.published = sentences
	a.seq = int32(len(sentences))
	a.prefix, a.prefixPending = sentence.Join(sentences), false
}

// prefixText is the answer so far, for the prompt.
func (a *answer) prefixText() string { return a.prefix }

func (a *answer) delta(reqStart time.Time, d model.Delta) {
	if !a.firstToken {
		a.firstToken = true
		a.t.e.d.Metrics.FirstToken.Observe(time.Since(reqStart).Seconds())
	}
	if d.Reasoning != "" {
		a.reason(d.Reasoning)
		a.reasoningField = true
	}
	if d.Content != "" {
		if a.reasoningField {
			a.endReasoning() // reasoning_content is over once content starts
			a.reasoningField = false
		}
		for _, p := range a.think.Push(d.Content) {
			a.part(p)
		}
	}
}

func (a *answer) part(p think.Part) {
	switch {
	case p.End:
		a.endReasoning()
	case p.Reasoning:
		a.reason(p.Text)
	default:
		a.text(p.Text)
	}
}

// endRound closes a model request: a tag cut short is text, reasoning ends.
func (a *answer) endRound() {
	for _, p := range a.think.Flush() {
		a.part(p)
	}
	a.endReasoning()
	a.rounds = append(a.rounds, strings.TrimSpace(a.round.String()))
	a.round.Reset()
}

// roundContent is the answer text of the last model request.
func (a *answer) roundContent() string { return a.rounds[len(a.rounds)-1] }

// nextRound separates the text of the next model request from the last one.
func (a *answer) nextRound() {
	if a.heldWS == "" && a.pushed {
		a.heldWS = " "
	}
}

func (a *answer) reason(s string) {
	a.reasoning.WriteString(s)
	for {
		buf := a.reasoning.String()
		i := strings.Index(buf, "\n\n")
		if i < 0 {
			return
		}
		a.emitReasoning(buf[:i])
		a.reasoning.Reset()
		a.reasoning.WriteString(buf[i+2:])
	}
}

func (a *answer) endReasoning() {
	a.emitReasoning(a.reasoning.String())
	a.reasoning.Reset()
}

func (a *answer) emitReasoning(s string) {
	s = strings.TrimSpace(s)
	if s == "" {
		return
	}
	a.rseq++
	id := a.t.p.assistantID
	a.t.out.send(protocol.New(a.t.cid, &protocol.ReasoningStep{ID: protocol.DeriveID("ar", id, a.rseq), MessageID: id,
		ConversationID: a.t.cid, Sequence: a.rseq, Content: s}), id+":r:"+strconv.Itoa(int(a.rseq)))
}

func (a *answer) text(s string) {
	if a.reasoning.Len() > 0 {
		a.endReasoning() // reasoning_content is over once the answer starts
	}
	a.round.WriteString(s)
	if !a.streaming {
		return
	}
	s = a.heldWS + s
	kept := strings.TrimRightFunc(s, unicode.IsSpace)
	a.heldWS = s[len(kept):]
	if kept == "" {
		return
	}
	a.pushed = true
	for _, sen := range a.split.Push(kept) {
		a.sentence(sen, false)
	}
}

func (a *answer) sentence(text string, final bool) {
	if a.prefixPending {
		a.prefixPending = false
		a.publishSentence(a.prefix, false)
	}
	a.publishSentence(text, final)
}

func (a *answer) publishSentence(text string, final bool) {
	a.seq++
	id := a.t.p.assistantID
	b := &protocol.AssistantSentence{ID: protocol.Ptr(protocol.DeriveID("ams", id, a.seq)), PreviousID: id,
		ConversationID: a.t.cid, Sequence: a.seq, Text: text}
	if final {
		b.IsFinal = protocol.Ptr(true)
	}
	a.published = append(a.published, text)
	a.t.out.send(protocol.New(a.t.cid, b), id+":s:"+strconv.Itoa(int(a.seq)))
}

// finish publishes the rest: the last sentence marked final, or the whole
// answer as one AssistantMessage.
func (a *answer) finish() {
	id := a.t.p.assistantID
	if !a.streaming {
		a.t.out.send(protocol.New(a.t.cid, &protocol.AssistantMessage{ID: id, PreviousID: &a.t.p.parentID,
			ConversationID: a.t.cid, Content: a.content(), Timestamp: protocol.Ptr(time.Now().UnixMilli())}), id+":msg")
		return
	}
	rest := a.split.Flush()
	switch {
	case len(rest) > 0:
		for i, s := range rest {
			a.sentence(s, i == len(rest)-1)
		}
	case a.prefixPending:
		a.prefixPending = false
		a.publishSentence(a.prefix, true)
	default:
		// Nothing (more) to say: an empty final sentence completes the answer.
		a.publishSentence("", true)
	}
}

// content is the answer's text as the client and persistence hold it.
func (a *answer) content() string {
	if a.streaming {
		return strings.TrimSpace(sentence.Join(a.published))
	}
	parts := []string{}
	if a.prefix != "" {
		parts = append(parts, a.prefix)
	}
	for _, r := range a.rounds {
		if r != "" {
			parts = append(parts, r)
		}
	}
	return strings.Join(parts, "\n\n")
}
