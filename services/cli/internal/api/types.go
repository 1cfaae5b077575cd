package api

import (
	"encoding/json"
	"time"
)

// Conversation as the API describes it; times are Unix milliseconds.
type Conversation struct {
	ID           string `json:"id"`
	Title        string `json:"title"`
	Status       string `json:"status"`
	CreatedAt    int64  `json:"createdAt"`
	UpdatedAt    int64  `json:"updatedAt"`
	MessageCount int    `json:"messageCount"`
	TipMessageID string `json:"tipMessageId,omitempty"`
	// LastClientStanzaID is the highest client stanza id stored for the
	// conversation, when the gateway reports it; a resumed chat continues
	// after it so JetStream's de-duplication never mistakes a new envelope
	// for an old one.
	LastClientStanzaID *int32 `json:"lastClientStanzaId,omitempty"`
}

// Updated is UpdatedAt as a time.
func (c Conversation) Updated() time.Time { return time.UnixMilli(c.UpdatedAt) }

// ConversationDetail is a conversation with the messages of its current branch, root first.
type ConversationDetail struct {
	Conversation
	Messages []Message `json:"messages"`
}

// Message on a branch.
type Message struct {
	ID             string      `json:"id"`
	PreviousID     string      `json:"previousId,omitempty"`
	Role           string      `json:"role"`
	Content        string      `json:"content"`
	Status         string      `json:"status"`
	Interrupted    bool        `json:"interrupted"`
	SequenceNumber int         `json:"sequenceNumber"`
	CreatedAt      int64       `json:"createdAt"`
	SiblingCount   int         `json:"siblingCount"`
	ToolUses       []ToolUse   `json:"toolUses,omitempty"`
	MemoriesUsed   []MemoryUse `json:"memoriesUsed,omitempty"`
	Reasoning      []Reasoning `json:"reasoning,omitempty"`
}

// ToolUse of an assistant message.
type ToolUse struct {
	ID           string `json:"id"`
	ToolName     string `json:"toolName"`
	Arguments    any    `json:"arguments"`
	Result       any    `json:"result,omitempty"`
	Status       string `json:"status"`
	ErrorCode    string `json:"errorCode,omitempty"`
	ErrorMessage string `json:"errorMessage,omitempty"`
}

// MemoryUse is a memory an answer used.
type MemoryUse struct {
	MemoryID   string  `json:"memoryId"`
	Content    string  `json:"content"`
	Similarity float64 `json:"similarity"`
}

// Reasoning is one reasoning step of an answer.
type Reasoning struct {
	Sequence int    `json:"sequence"`
	Content  string `json:"content"`
}

// Page of conversations; Raw holds them as the gateway sent them.
type Page struct {
	Conversations []Conversation
	Raw           []json.RawMessage
	NextCursor    string
}
