package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/llm/internal/tools"
)

// maxEnvelopeResult caps a tool result carried in a ToolUseResult (the
// protocol allows 1 MiB per envelope).
const maxEnvelopeResult = 256 << 10

// callTools announces every call with a ToolUseRequest, runs them at the
// same time and announces each ToolUseResult; the results, errors included,
// go back to the model as tool messages in call order.
func (t *turn) callTools(round int, calls []openai.ToolCall) []openai.ChatCompletionMessage {
	out := make([]openai.ChatCompletionMessage, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		id := protocol.DeriveID("atu", t.p.assistantID, t.attempt, round, i)
		name := c.Function.Name
		args, argErr := parseArguments(c.Function.Arguments)
		req := &protocol.ToolUseRequest{ID: id, MessageID: t.p.assistantID, ConversationID: t.cid, ToolName: name,
			Parameters: protocol.ToolUseRequestParameters(args), Execution: protocol.ToolUseRequestExecutionServer}
		if d := t.e.d.Toolbox.Timeout(name); d > 0 {
			req.TimeoutMs = protocol.Ptr(int32(min(d.Milliseconds(), 1<<31-1)))
		}
		t.out.send(protocol.New(t.cid, req), id+":req")
		wg.Go(func() {
			res := t.callTool(name, args, argErr)
			res.ID, res.RequestID, res.ConversationID = protocol.DeriveID("atr", id), id, t.cid
			t.out.send(protocol.New(t.cid, res), id+":res")
			out[i] = openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: c.ID, Name: name, Content: t.forModel(res)}
		})
	}
	wg.Wait()
	return out
}

func (t *turn) callTool(name string, args map[string]any, argErr error) *protocol.ToolUseResult {
	ctx, span := tracer.Start(t.ctx, "llm.tool", trace.WithAttributes(attribute.String("alicia.tool", name)))
	defer span.End()
	res := &protocol.ToolUseResult{}
	fail := func(code protocol.ToolUseResultErrorCode, msg string) *protocol.ToolUseResult {
		res.ErrorCode, res.ErrorMessage = &code, &msg
		label := name
		if code == protocol.ToolUseResultErrorCodeUnknownTool {
			label = "unknown"
		}
		t.e.d.Metrics.ToolCalls.WithLabelValues(label, string(code)).Inc()
		span.SetAttributes(attribute.String("alicia.tool_error", string(code)))
		return res
	}
	if argErr != nil {
		return fail(protocol.ToolUseResultErrorCodeInvalidParameters, argErr.Error())
	}
	inv := tools.Invocation{ConversationID: t.cid, MessageID: t.p.assistantID, UserID: t.userID}
	v, err := t.e.d.Toolbox.Call(ctx, name, inv, args)
	switch {
	case err == nil:
	case errors.Is(err, tools.ErrUnknownTool):
		return fail(protocol.ToolUseResultErrorCodeUnknownTool, err.Error())
	case errors.Is(err, tools.ErrInvalidParameters):
		return fail(protocol.ToolUseResultErrorCodeInvalidParameters, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return fail(protocol.ToolUseResultErrorCodeTimeout, err.Error())
	default:
		return fail(protocol.ToolUseResultErrorCodeExecutionError, err.Error())
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fail(protocol.ToolUseResultErrorCodeExecutionError, "the tool's result is not representable as JSON: "+err.Error())
	}
	var generic any
	if len(b) > maxEnvelopeResult {
		generic = cut(string(b), maxEnvelopeResult)
	} else if err := json.Unmarshal(b, &generic); err != nil {
		return fail(protocol.ToolUseResultErrorCodeExecutionError, "the tool's result is not valid JSON: "+err.Error())
	}
	res.Success, res.Result = true, generic
	t.e.d.Metrics.ToolCalls.WithLabelValues(name, "success").Inc()
	return res
}

// forModel is the tool message: the result (a string as is, anything else
// as JSON) or the error, cut to ToolResultMax bytes.
func (t *turn) forModel(res *protocol.ToolUseResult) string {
	var s string
	switch {
	case !res.Success:
		s = fmt.Sprintf("Error (%s): %s", *res.ErrorCode, *res.ErrorMessage)
	default:
		if str, ok := res.Result.(string); ok {
			s = str
		} else {
			b, _ := json.Marshal(res.Result)
			s = string(b)
		}
	}
	return cut(s, t.e.s.ToolResultMax)
}

func parseArguments(raw string) (map[string]any, error) {
	args := map[string]any{}
	if strings.TrimSpace(raw) == "" {
		return args, nil
	}
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		return map[string]any{}, fmt.Errorf("%w: the arguments are not a JSON object: %v", tools.ErrInvalidParameters, err)
	}
	if args == nil {
		args = map[string]any{}
	}
	return args, nil
}

// cut shortens s to at most n bytes on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if n <= 0 || len(s) <= n {
		return s
	}
	const mark = " …[truncated]"
	end := max(n-len(mark), 0)
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + mark
}
