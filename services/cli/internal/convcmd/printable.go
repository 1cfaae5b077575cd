package convcmd

import (
	"encoding/json"

	"github.com/alicia-voice/alicia/services/cli/internal/api"
	"github.com/alicia-voice/alicia/services/cli/internal/style"
)

// printableMessage is a stored message with every text it shows made
// printable, for PrintMessage.
func printableMessage(m api.Message) api.Message {
	m.Role, m.Content, m.Status = style.Printable(m.Role), style.Printable(m.Content), style.Printable(m.Status)
	mems := make([]api.MemoryUse, len(m.MemoriesUsed))
	for i, mu := range m.MemoriesUsed {
		mu.Content = style.Printable(mu.Content)
		mems[i] = mu
	}
	m.MemoriesUsed = mems
	steps := make([]api.Reasoning, len(m.Reasoning))
	for i, r := range m.Reasoning {
		r.Content = style.Printable(r.Content)
		steps[i] = r
	}
	m.Reasoning = steps
	tools := make([]api.ToolUse, len(m.ToolUses))
	for i, tu := range m.ToolUses {
		tu.ToolName, tu.Status = style.Printable(tu.ToolName), style.Printable(tu.Status)
		tu.ErrorCode, tu.ErrorMessage = printableText(tu.ErrorCode), printableText(tu.ErrorMessage)
		tu.Arguments, tu.Result = printableJSON(tu.Arguments), printableJSON(tu.Result)
		tools[i] = tu
	}
	m.ToolUses = tools
	return m
}

func printableText(s *string) *string {
	if s == nil {
		return nil
	}
	p := style.Printable(*s)
	return &p
}

// printableJSON is a stored JSON value with its strings made printable.
func printableJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return raw
	}
	b, err := json.Marshal(style.PrintableValue(jsonValue(raw)))
	if err != nil {
		return nil
	}
	return b
}

// jsonValue decodes a stored JSON value: nil when it is absent or null, the
// text itself when it is not JSON.
func jsonValue(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	return v
}

func text(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
