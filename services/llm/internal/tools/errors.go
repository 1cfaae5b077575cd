package tools

import "errors"

// Errors a call can fail with besides the tool's own; the llm maps them to
// ToolUseResult error codes (unknown_tool, invalid_parameters, timeout =
// context.DeadlineExceeded, anything else execution_error).
var (
	ErrUnknownTool       = errors.New("unknown tool")
	ErrInvalidParameters = errors.New("invalid parameters")
)

// Execution errors (execution_error): their messages go back to the model as
// the tool's result, so they say plainly what went wrong.
var (
	// ErrToolFailed: the tool ran and reported a failure (an MCP result with
	// isError, a panic in a built-in tool).
	ErrToolFailed = errors.New("tool failed")
	// ErrMemoryUnavailable: memory.search could not be reached or answered
	// with an error.
	ErrMemoryUnavailable = errors.New("long-term memory is unavailable")
	// ErrMemorySearchOff: the memory service runs without an embeddings
	// backend, so it cannot search.
	ErrMemorySearchOff = errors.New("long-term memory search is off (no embeddings backend is configured)")
	// ErrSearchFailed: the web search engine could not be reached or gave an
	// answer that is not a result page.
	ErrSearchFailed = errors.New("web search failed")
	// ErrServerUnavailable: the MCP server of a tool is not connected.
	ErrServerUnavailable = errors.New("MCP server is not connected")
	// ErrNoUser: a tool that acts for a user was called without one.
	ErrNoUser = errors.New("no user is known for this conversation")
)

// ErrInvalidConfig is returned by Config.Validate and for an MCP server
// configuration that cannot be used.
var ErrInvalidConfig = errors.New("invalid tools configuration")
