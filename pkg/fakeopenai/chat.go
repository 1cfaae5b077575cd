package fakeopenai

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

type wireUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type wireDelta struct {
	Role             string         `json:"role,omitempty"`
	Content          *string        `json:"content,omitempty"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	ToolCalls        []wireToolCall `json:"tool_calls,omitempty"`
}

type wireChunk struct {
	ID      string            `json:"id"`
	Object  string            `json:"object"`
	Created int64             `json:"created"`
	Model   string            `json:"model"`
	Choices []wireChunkChoice `json:"choices"`
	Usage   *wireUsage        `json:"usage,omitempty"`
}

type wireChunkChoice struct {
	Index        int       `json:"index"`
	Delta        wireDelta `json:"delta"`
	FinishReason *string   `json:"finish_reason"`
}

type wireCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []wireChoice `json:"choices"`
	Usage   wireUsage    `json:"usage"`
}

type wireChoice struct {
	Index   int `json:"index"`
	Message struct {
		Role             string         `json:"role"`
		Content          string         `json:"content"`
		ReasoningContent string         `json:"reasoning_content,omitempty"`
		ToolCalls        []wireToolCall `json:"tool_calls,omitempty"`
	} `json:"message"`
	FinishReason string `json:"finish_reason"`
}

// answer is a turn resolved for one request: ids, finish reason and usage
// filled in.
type answer struct {
	Turn
	id      string
	model   string
	created int64
	usage   wireUsage
}

func (h *Handler) chat(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "read body: "+err.Error())
		return
	}
	req, err := decodeChatRequest(r, body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	h.record(func() { h.requests = append(h.requests, req) })

	f := h.takeFault()
	if h.applyFault(w, r, f) {
		return
	}
	turn, ok := h.nextTurn(req)
	if !ok {
		writeError(w, http.StatusInternalServerError, ErrNoTurn.Error())
		return
	}
	if turn.Status != 0 {
		writeError(w, turn.Status, http.StatusText(turn.Status)+" (scripted by fakeopenai)")
		return
	}
	a := h.resolve(req, turn)
	p := h.Profile()
	if req.Stream {
		h.stream(w, r, req, a, f, p)
		return
	}
	tokens := 0
	for _, d := range a.deltas() {
		tokens += deltaTokens(d)
	}
	if !h.sleep(r.Context(), p.ChatTime(tokens)) {
		dropConnection(w)
		return
	}
	writeJSON(w, http.StatusOK, a.completion())
}

func (h *Handler) resolve(req Request, t Turn) answer {
	n := h.seq.Add(1)
	a := answer{Turn: t, id: fmt.Sprintf("chatcmpl-fake%d", n), model: req.Model, created: time.Now().Unix()}
	if a.model == "" {
		a.model = "fake-chat"
	}
	a.ToolCalls = append([]ToolCall(nil), t.ToolCalls...)
	for i := range a.ToolCalls {
		if a.ToolCalls[i].ID == "" {
			a.ToolCalls[i].ID = fmt.Sprintf("call_fake%d_%d", n, i)
		}
	}
	if a.FinishReason == "" {
		a.FinishReason = FinishStop
		if len(a.ToolCalls) > 0 {
			a.FinishReason = FinishToolCalls
		}
	}
	if t.Usage != nil {
		a.usage = wireUsage{PromptTokens: t.Usage.PromptTokens, CompletionTokens: t.Usage.CompletionTokens}
	} else {
		for _, m := range req.Messages {
			a.usage.PromptTokens += len(strings.Fields(m.Content))
		}
		a.usage.CompletionTokens = len(t.Reasoning) + len(t.Text)
		for _, c := range a.ToolCalls {
			a.usage.CompletionTokens += 1 + len(pieces(c.Arguments))
		}
	}
	a.usage.TotalTokens = a.usage.PromptTokens + a.usage.CompletionTokens
	return a
}

func (a answer) completion() wireCompletion {
	c := wireCompletion{ID: a.id, Object: "chat.completion", Created: a.created, Model: a.model, Usage: a.usage}
	c.Choices = make([]wireChoice, 1)
	ch := &c.Choices[0]
	ch.FinishReason = a.FinishReason
	ch.Message.Role = "assistant"
	ch.Message.Content = strings.Join(a.Text, "")
	ch.Message.ReasoningContent = strings.Join(a.Reasoning, "")
	for _, tc := range a.ToolCalls {
		wc := wireToolCall{ID: tc.ID, Type: "function"}
		wc.Function.Name, wc.Function.Arguments = tc.Name, tc.Arguments
		ch.Message.ToolCalls = append(ch.Message.ToolCalls, wc)
	}
	return c
}

// deltas lists the stream's choice deltas in OpenAI's order: role first,
// reasoning, text, then each tool call (id and name, then argument pieces).
func (a answer) deltas() []wireDelta {
	empty := ""
	out := []wireDelta{{Role: "assistant", Content: &empty}}
	for _, r := range a.Reasoning {
		out = append(out, wireDelta{ReasoningContent: r})
	}
	for _, t := range a.Text {
		out = append(out, wireDelta{Content: &t})
	}
	for i, tc := range a.ToolCalls {
		head := wireToolCall{Index: &i, ID: tc.ID, Type: "function"}
		head.Function.Name = tc.Name
		out = append(out, wireDelta{ToolCalls: []wireToolCall{head}})
		for _, p := range pieces(tc.Arguments) {
			part := wireToolCall{Index: &i}
			part.Function.Arguments = p
			out = append(out, wireDelta{ToolCalls: []wireToolCall{part}})
		}
	}
	return out
}

// deltaTokens is how many generated tokens a streamed delta carries.
func deltaTokens(d wireDelta) int {
	n := 0
	if d.Content != nil {
		n += EstimateTokens(*d.Content)
	}
	n += EstimateTokens(d.ReasoningContent)
	for _, c := range d.ToolCalls {
		n += EstimateTokens(c.Function.Name) + EstimateTokens(c.Function.Arguments)
	}
	return n
}

// stream sends the answer as SSE chunks: with a timing profile, each delta
// when its last token is generated (p.TokenAt), Fault.ChunkDelay added
// between chunks.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, req Request, a answer, f Fault, p Profile) {
	start := time.Now()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if !p.IsInstant() {
		_ = rc.Flush() // the stream is open before the first token, as vLLM's
	}

	send := func(payload []byte) bool {
		if _, err := fmt.Fprintf(w, "data: %s\n\n", payload); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	chunk := func(d wireDelta, finish *string) wireChunk {
		c := wireChunk{ID: a.id, Object: "chat.completion.chunk", Created: a.created, Model: a.model}
		c.Choices = []wireChunkChoice{{Delta: d, FinishReason: finish}}
		return c
	}

	// at[i] is when chunk i is due, from the request: its last token's
	// time; the finish and usage chunks follow the last delta at once.
	chunks, at, tokens := []wireChunk{}, []time.Duration{}, 0
	for _, d := range a.deltas() {
		chunks = append(chunks, chunk(d, nil))
		tokens += deltaTokens(d)
		at = append(at, p.TokenAt(tokens-1))
	}
	chunks = append(chunks, chunk(wireDelta{}, &a.FinishReason))
	at = append(at, p.ChatTime(tokens))
	if req.IncludeUsage {
		u := a.usage
		last := wireChunk{ID: a.id, Object: "chat.completion.chunk", Created: a.created, Model: a.model, Usage: &u}
		last.Choices = []wireChunkChoice{}
		chunks = append(chunks, last)
		at = append(at, p.ChatTime(tokens))
	}
	for i, c := range chunks {
		// Cut the connection rather than end the body: a clean end without
		// [DONE] would look like a complete answer to some clients.
		if (i > 0 && !h.sleep(r.Context(), f.ChunkDelay)) || (f.DropAfter > 0 && i == f.DropAfter) {
			dropConnection(w)
			return
		}
		// Due on the profile's clock, shifted by the chunk delays so far:
		// the two add up, and slow writes do not make the pace drift.
		if due := start.Add(at[i] + time.Duration(i)*f.ChunkDelay); !h.sleep(r.Context(), time.Until(due)) {
			dropConnection(w)
			return
		}
		payload, err := json.Marshal(c)
		if err != nil || !send(payload) {
			return
		}
	}
	send([]byte("[DONE]"))
}

// pieces splits tool call arguments on rune boundaries, ArgumentPiece runes
// each, so every piece stays valid UTF-8.
func pieces(s string) []string {
	var out []string
	runes := []rune(s)
	for len(runes) > 0 {
		n := min(ArgumentPiece, len(runes))
		out = append(out, string(runes[:n]))
		runes = runes[n:]
	}
	return out
}
