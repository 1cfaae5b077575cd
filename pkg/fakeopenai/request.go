package fakeopenai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Request is a chat completion request as the fake received it.
type Request struct {
	Model        string
	Messages     []Message
	Tools        []Tool
	Stream       bool
	IncludeUsage bool        // stream_options.include_usage
	Header       http.Header // as sent, Authorization included
	Body         []byte      // the raw JSON body
}

// LastUser is the content of the last user message, or "".
func (r Request) LastUser() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content
		}
	}
	return ""
}

// Message is one message of a recorded request. Content of multi-part
// messages is the concatenation of their text parts.
type Message struct {
	Role             string
	Content          string
	Name             string
	ReasoningContent string
	ToolCalls        []ToolCall
	ToolCallID       string
}

// Tool is a function tool offered in a request.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// EmbeddingRequest is an embeddings request as the fake received it.
type EmbeddingRequest struct {
	Model          string
	Input          []string
	Dimensions     int
	EncodingFormat string
}

type wireChatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role             string          `json:"role"`
		Content          json.RawMessage `json:"content"`
		Name             string          `json:"name"`
		ReasoningContent string          `json:"reasoning_content"`
		ToolCalls        []wireToolCall  `json:"tool_calls"`
		ToolCallID       string          `json:"tool_call_id"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	Stream        bool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type wireToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

func decodeChatRequest(r *http.Request, body []byte) (Request, error) {
	var w wireChatRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return Request{}, fmt.Errorf("decode chat request: %w", err)
	}
	if len(w.Messages) == 0 {
		return Request{}, fmt.Errorf("messages: must not be empty")
	}
	req := Request{
		Model:        w.Model,
		Stream:       w.Stream,
		IncludeUsage: w.StreamOptions != nil && w.StreamOptions.IncludeUsage,
		Header:       r.Header.Clone(),
		Body:         body,
	}
	for i, m := range w.Messages {
		content, err := decodeContent(m.Content)
		if err != nil {
			return Request{}, fmt.Errorf("messages[%d].content: %w", i, err)
		}
		msg := Message{Role: m.Role, Content: content, Name: m.Name,
			ReasoningContent: m.ReasoningContent, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
		req.Messages = append(req.Messages, msg)
	}
	for _, t := range w.Tools {
		req.Tools = append(req.Tools, Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	return req, nil
}

// decodeContent accepts a string, null, or an array of content parts.
func decodeContent(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", err
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// decodeInput accepts the string and []string forms of embeddings input.
func decodeInput(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return []string{s}, nil
	}
	var ss []string
	if err := json.Unmarshal(raw, &ss); err != nil {
		return nil, fmt.Errorf("input: want a string or an array of strings")
	}
	if len(ss) == 0 {
		return nil, fmt.Errorf("input: must not be empty")
	}
	return ss, nil
}
