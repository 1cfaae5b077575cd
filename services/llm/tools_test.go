package llm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// A tool-call turn: the model asks for the calculator, the request and the
// result are announced and stored, the result goes back to the model, and its
// final answer is streamed.
func TestToolCallTurn(t *testing.T) {
	h := newHarness(t)
	h.replica(h.config(h.fake))
	cid := h.conversation()
	w := h.watch(cid)
	h.fake.On(fakeopenai.HasToolResult(), fakeopenai.Text("Two times seven plus one is 15."))
	h.fake.On(fakeopenai.HasTools(), fakeopenai.Turn{Text: fakeopenai.Words("Let me calculate."),
		ToolCalls: []fakeopenai.ToolCall{{ID: "call_calc", Name: "calculator", Arguments: `{"expression":"2*7+1"}`}}})
	uid := h.say(cid, "what is 2*7+1?")
	sa, sents, envs := w.answered(t, uid)

	reqs := bodies[*protocol.ToolUseRequest](envs)
	ress := bodies[*protocol.ToolUseResult](envs)
	if len(reqs) != 1 || len(ress) != 1 {
		t.Fatalf("%d requests, %d results", len(reqs), len(ress))
	}
	req, res := reqs[0], ress[0]
	if req.MessageID != sa.ID || req.ToolName != "calculator" || req.Parameters["expression"] != "2*7+1" ||
		req.Execution != protocol.ToolUseRequestExecutionServer || req.TimeoutMs == nil || *req.TimeoutMs != 2000 {
		t.Fatalf("request %+v", req)
	}
	if res.RequestID != req.ID || !res.Success || res.ErrorCode != nil {
		t.Fatalf("result %+v", res)
	}
	if m, ok := res.Result.(map[string]any); !ok || fmt.Sprint(m["result"]) != "15" {
		t.Fatalf("result value %#v", res.Result)
	}
	var texts []string
	for _, s := range sents {
		texts = append(texts, s.Text)
	}
	if got := strings.Join(texts, "|"); got != "Let me calculate.|Two times seven plus one is 15." {
		t.Fatalf("sentences %q", got)
	}
	// The second request carries the assistant's call and the tool's answer.
	second := h.fake.Requests()[1]
	n := len(second.Messages)
	call, tool := second.Messages[n-2], second.Messages[n-1]
	if call.Role != "assistant" || len(call.ToolCalls) != 1 || call.ToolCalls[0].ID != "call_calc" || call.Content != "Let me calculate." {
		t.Fatalf("assistant call message %+v", call)
	}
	if tool.Role != "tool" || tool.ToolCallID != "call_calc" || !strings.Contains(tool.Content, `"result":15`) {
		t.Fatalf("tool message %+v", tool)
	}
	if len(second.Tools) != 3 {
		t.Fatalf("tools offered %+v", second.Tools)
	}
	// Rows: the tool use succeeded with its result; the answer is complete.
	var status, args, result string
	testkit.Eventually(t, 10*time.Second, func() bool {
		err := h.pool.QueryRow(context.Background(), `SELECT status::text, tool_arguments::text, COALESCE(tool_result::text, '') FROM alicia_tool_uses WHERE id = $1`, req.ID).
			Scan(&status, &args, &result)
		return err == nil && status != "pending"
	}, "tool use row")
	var argv, resv map[string]any
	_ = json.Unmarshal([]byte(args), &argv)
	_ = json.Unmarshal([]byte(result), &resv)
	if status != "success" || argv["expression"] != "2*7+1" || resv["result"] != float64(15) {
		t.Fatalf("tool use row: %s %s %s", status, args, result)
	}
	h.row(t, sa.ID, func(r row) bool {
		return r.status == "completed" && r.contents == "Let me calculate. Two times seven plus one is 15."
	})
}

// A failing tool's error goes back to the model as the tool's result, and
// the model answers with it.
func TestToolErrorsGoBackToTheModel(t *testing.T) {
	h := newHarness(t)
	h.replica(h.config(h.fake))
	cid := h.conversation()
	w := h.watch(cid)
	cases := []struct {
		name, tool, args string
		code             protocol.ToolUseResultErrorCode
		inModel          string
	}{
		{"execution error", "broken", `{"x":"1"}`, protocol.ToolUseResultErrorCodeExecutionError, "Error (execution_error): the broken tool is broken"},
		{"unknown tool", "teleport", `{}`, protocol.ToolUseResultErrorCodeUnknownTool, "Error (unknown_tool)"},
		{"arguments not JSON", "calculator", `{"expression":`, protocol.ToolUseResultErrorCodeInvalidParameters, "Error (invalid_parameters)"},
		{"invalid expression", "calculator", `{"expression":"2**"}`, protocol.ToolUseResultErrorCodeInvalidParameters, "Error (invalid_parameters)"},
		{"timeout", "sleepy", `{"x":"1"}`, protocol.ToolUseResultErrorCodeTimeout, "Error (timeout)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h.fake.Reset()
			h.fake.On(fakeopenai.HasToolResult(), fakeopenai.Text("Sorry, that did not work."))
			h.fake.On(fakeopenai.HasTools(), fakeopenai.Calls(fakeopenai.ToolCall{Name: c.tool, Arguments: c.args}))
			uid := h.say(cid, "try "+c.name)
			sa, sents, envs := w.answered(t, uid)
			var res *protocol.ToolUseResult
			for _, r := range bodies[*protocol.ToolUseResult](envs) {
				for _, q := range bodies[*protocol.ToolUseRequest](envs) {
					if q.ID == r.RequestID && q.MessageID == sa.ID {
						res = r
					}
				}
			}
			if res == nil || res.Success || res.ErrorCode == nil || *res.ErrorCode != c.code || res.ErrorMessage == nil {
				t.Fatalf("result %+v", res)
			}
			reqs := h.fake.Requests()
			last := reqs[len(reqs)-1].Messages
			if tool := last[len(last)-1]; tool.Role != "tool" || !strings.HasPrefix(tool.Content, c.inModel) {
				t.Fatalf("tool message to the model: %+v", tool)
			}
			if len(sents) != 1 || sents[0].Text != "Sorry, that did not work." {
				t.Fatalf("answer %+v", sents)
			}
			testkit.Eventually(t, 10*time.Second, func() bool {
				var status string
				_ = h.pool.QueryRow(context.Background(), `SELECT status::text FROM alicia_tool_uses WHERE id = $1`, res.RequestID).Scan(&status)
				return status == "error"
			}, "tool use row in error")
		})
	}
}

// The model may call tools for at most MaxToolIterations requests; the one
// after that is sent without tools and must answer.
func TestToolLoopIsBounded(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(h.fake)
	cfg.MaxToolIterations = 2
	h.replica(cfg)
	cid := h.conversation()
	w := h.watch(cid)
	h.fake.AddScript(fakeopenai.Script{Match: fakeopenai.HasTools(), Repeat: true,
		Turns: []fakeopenai.Turn{fakeopenai.Calls(fakeopenai.ToolCall{Name: "calculator", Arguments: `{"expression":"1+1"}`})}})
	h.fake.On(fakeopenai.Not(fakeopenai.HasTools()), fakeopenai.Text("It is 2."))
	uid := h.say(cid, "loop")
	_, sents, envs := w.answered(t, uid)
	reqs := h.fake.Requests()
	if len(reqs) != 3 || len(reqs[0].Tools) == 0 || len(reqs[1].Tools) == 0 || len(reqs[2].Tools) != 0 {
		t.Fatalf("%d requests, tools offered: %d %d %d", len(reqs), len(reqs[0].Tools), len(reqs[1].Tools), len(reqs[len(reqs)-1].Tools))
	}
	if n := len(bodies[*protocol.ToolUseResult](envs)); n != 2 {
		t.Fatalf("%d tool results, want 2", n)
	}
	if len(sents) != 1 || sents[0].Text != "It is 2." {
		t.Fatalf("answer %+v", sents)
	}
}

// With no Toolbox given, Run uses the real registry (internal/tools): its
// calculator answers the model's call.
func TestRealToolRegistry(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(h.fake)
	cfg.Toolbox = nil
	h.replica(cfg)
	cid := h.conversation()
	w := h.watch(cid)
	h.fake.On(fakeopenai.HasToolResult(), fakeopenai.Text("It is 42."))
	h.fake.On(fakeopenai.HasTools(), fakeopenai.Calls(fakeopenai.ToolCall{Name: "calculator", Arguments: `{"expression":"6*7"}`}))
	_, sents, envs := w.answered(t, h.say(cid, "6*7?"))
	res := bodies[*protocol.ToolUseResult](envs)
	if len(res) != 1 || !res[0].Success || !strings.Contains(fmt.Sprint(res[0].Result), "42") {
		t.Fatalf("results %+v", res)
	}
	if len(sents) != 1 || sents[0].Text != "It is 42." {
		t.Fatalf("answer %+v", sents)
	}
	var names []string
	for _, tl := range h.fake.Requests()[0].Tools {
		names = append(names, tl.Name)
	}
	if !strings.Contains(strings.Join(names, ","), "calculator") {
		t.Fatalf("tools offered %v", names)
	}
	t.Logf("tools offered: %v", names)
}
