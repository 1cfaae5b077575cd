package api

import (
	"encoding/json"
	"time"

	"github.com/alicia-voice/alicia/pkg/restapi"
)

// The API's shapes are generated from its contract,
// proto-schemas/rest/openapi.json (pkg/restapi); times are Unix
// milliseconds.
type (
	// Conversation as the API describes it. LastClientStanzaID is the
	// highest client stanza id stored for it: a resumed chat continues
	// after it so JetStream's de-duplication never mistakes a new envelope
	// for an old one.
	Conversation = restapi.Conversation
	// Message on a branch.
	Message = restapi.Message
	// ToolUse of an assistant message.
	ToolUse = restapi.ToolUse
	// MemoryUse is a memory an answer used.
	MemoryUse = restapi.MemoryUsed
	// Reasoning is one reasoning step of an answer.
	Reasoning = restapi.ReasoningStep
)

// Updated is a conversation's UpdatedAt as a time.
func Updated(c Conversation) time.Time { return time.UnixMilli(c.UpdatedAt) }

// ConversationDetail is a conversation with the messages of its current
// branch, root first: restapi.ConversationWithMessages without streamSeq,
// which the CLI does not use.
type ConversationDetail struct {
	Conversation
	Messages []Message `json:"messages"`
}

// Page of conversations; Raw holds them as the gateway sent them.
type Page struct {
	Conversations []Conversation
	Raw           []json.RawMessage
	NextCursor    string
}
