package turn

import (
	"context"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/llm/internal/model"
	"github.com/alicia-voice/alicia/services/llm/internal/tools"
)

// generate runs the model, and the tools it asks for, until it answers
// without tool calls. Tools are offered for at most MaxToolIterations
// requests; the request after that must answer.
func (t *turn) generate(msgs []openai.ChatCompletionMessage) error {
	offered := t.comp.tools
	for round := 0; ; round++ {
		offer := offered
		if round >= t.e.s.MaxToolIterations {
			offer = nil
		}
		if round > 0 {
			t.ans.nextRound()
		}
		ctx, span := tracer.Start(t.ctx, "llm.model_request", trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attribute.Int("alicia.round", round), attribute.Int("alicia.tools_offered", len(offer))))
		start := time.Now()
		res, err := t.stream(ctx, round, model.Request{Messages: msgs, Tools: offer}, func(d model.Delta) { t.ans.delta(start, d) })
		span.SetAttributes(attribute.Int("alicia.attempts", res.Attempts), attribute.Int("alicia.tool_calls", len(res.ToolCalls)),
			attribute.String("gen_ai.response.finish_reason", string(res.FinishReason)))
		if res.Usage != nil {
			span.SetAttributes(attribute.Int("gen_ai.usage.input_tokens", res.Usage.PromptTokens), attribute.Int("gen_ai.usage.output_tokens", res.Usage.CompletionTokens))
		}
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
		t.ans.endRound()
		t.countAttempts(res, err)
		if err != nil {
			return err
		}
		if len(res.ToolCalls) == 0 || len(offer) == 0 {
			return nil
		}
		calls := res.ToolCalls
		for i := range calls {
			if calls[i].ID == "" {
				calls[i].ID = "call_" + protocol.DeriveID("c", t.p.assistantID, t.attempt, round, i)[2:]
			}
		}
		msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: t.ans.roundContent(), ToolCalls: calls})
		msgs = append(msgs, t.callTools(round, calls)...)
		if t.ctx.Err() != nil {
			return context.Cause(t.ctx)
		}
		if err := t.out.failed(); err != nil {
			return err
		}
	}
}

func (t *turn) countAttempts(res model.Result, err error) {
	m := t.e.d.Metrics.ModelAttempts
	if res.Attempts > 1 {
		m.WithLabelValues("retry").Add(float64(res.Attempts - 1))
	}
	switch {
	case err == nil:
		m.WithLabelValues("ok").Inc()
	case t.ctx.Err() == nil:
		m.WithLabelValues("failed").Inc()
	}
}

func toolDefinitions(specs []tools.Spec) []openai.Tool {
	out := make([]openai.Tool, 0, len(specs))
	for _, s := range specs {
		params := s.Parameters
		if params == nil {
			params = map[string]any{"type": "object", "properties": map[string]any{}}
		}
		out = append(out, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: s.Name, Description: s.Description, Parameters: params}})
	}
	return out
}
