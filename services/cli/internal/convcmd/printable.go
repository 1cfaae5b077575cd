package convcmd

import (
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
		tu.ErrorCode, tu.ErrorMessage = style.Printable(tu.ErrorCode), style.Printable(tu.ErrorMessage)
		tu.Arguments, tu.Result = style.PrintableValue(tu.Arguments), style.PrintableValue(tu.Result)
		tools[i] = tu
	}
	m.ToolUses = tools
	return m
}
