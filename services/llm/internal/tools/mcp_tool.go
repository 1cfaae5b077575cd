package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/alicia-voice/alicia/pkg/clip"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxToolNameLength is the longest tool name the OpenAI-compatible APIs accept.
const MaxToolNameLength = 64

// sanitizeName keeps [A-Za-z0-9_-]; every other character becomes '_'.
func sanitizeName(s string) string {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			out = append(out, byte(r))
		default:
			out = append(out, '_')
		}
	}
	return string(out)
}

// MCPToolName is the name the model sees for an MCP server's tool:
// mcp_<server>_<tool>, sanitized to [A-Za-z0-9_-]. A name past 64
// characters is cut and ends with a hash of the full one, so two long
// names stay apart.
func MCPToolName(server, tool string) string {
	name := "mcp_" + sanitizeName(server) + "_" + sanitizeName(tool)
	if len(name) <= MaxToolNameLength {
		return name
	}
	return name[:MaxToolNameLength-9] + "_" + shortHash(server+"\x00"+tool)
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:4])
}

// mcpTool is one tool of an MCP server.
type mcpTool struct {
	server *mcpServer
	remote string // the tool's name on its server
	spec   Spec
}

func (t *mcpTool) Spec() Spec { return t.spec }

func (t *mcpTool) Call(ctx context.Context, _ Invocation, args map[string]any) (any, error) {
	sess := t.server.current()
	if sess == nil {
		return nil, t.server.unavailable()
	}
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: t.remote, Arguments: args})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var we *jsonrpc.Error
		if errors.As(err, &we) {
			if we.Code == jsonrpc.CodeInvalidParams {
				return nil, fmt.Errorf("%w: %s", ErrInvalidParameters, we.Message)
			}
			return nil, fmt.Errorf("%w: %s", ErrToolFailed, we.Message)
		}
		// Not an answer from the server: the connection may be gone.
		t.server.suspect()
		return nil, fmt.Errorf("%w: %q: %v", ErrServerUnavailable, t.server.name, err)
	}
	text := resultText(res, t.server.r.cfg.MaxResultBytes)
	if res.IsError {
		if text == "" {
			text = "the tool reported an error without a message"
		}
		return nil, fmt.Errorf("%w: %s", ErrToolFailed, text)
	}
	if text == "" && res.StructuredContent != nil {
		return jsonValue(res.StructuredContent), nil
	}
	return text, nil
}

// resultText joins a result's content as text for the model: text as is,
// embedded text resources by their text, anything else as a short note
// (the model cannot see images or hear audio). At most max bytes.
func resultText(res *mcp.CallToolResult, max int) string {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource %s %s]", c.Name, c.URI))
		case *mcp.EmbeddedResource:
			switch {
			case c.Resource == nil:
			case c.Resource.Text != "":
				parts = append(parts, c.Resource.Text)
			default:
				parts = append(parts, fmt.Sprintf("[resource %s, %d bytes]", c.Resource.URI, len(c.Resource.Blob)))
			}
		}
	}
	text := strings.Join(parts, "\n")
	if len(text) > max {
		const mark = "\n[… cut: the result was longer]"
		text = clip.Bytes(text, max-len(mark)) + mark
	}
	return text
}

// jsonValue gives v the plain JSON shape (maps, slices, float64), which
// every encoder downstream takes.
func jsonValue(v any) any {
	m, err := toJSONMap(map[string]any{"v": v})
	if err != nil {
		return fmt.Sprint(v)
	}
	return m["v"]
}
