// Package tools is the llm service's tool registry: the built-in tools
// (calculator, memory_query, web_search) and the tools of MCP servers
// (mcp_<server>_<tool>), with the enabled flags kept in alicia_tools.
package tools

import "context"

// Spec is what the model is told about a tool.
type Spec struct {
	Name        string
	Description string
	Parameters  map[string]any // JSON Schema of the arguments
	Source      string         // "builtin" or "mcp:<server>"
}

// Invocation is who calls a tool, for tools that act for a user.
type Invocation struct {
	ConversationID string
	MessageID      string // the assistant message of the turn
	UserID         string
}

// Tool is one callable tool.
type Tool interface {
	Spec() Spec
	// Call runs the tool; the result must be representable as JSON.
	Call(ctx context.Context, inv Invocation, args map[string]any) (any, error)
}
