package web_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// startControl serves what the specs ask of the stack itself, on 127.0.0.1:
//
//	POST /restart-gateway  stop the gateway and start it again on its port
//	                       (204 once it listens again): every WebSocket drops
func startControl(t *testing.T, s *stack) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /restart-gateway", func(w http.ResponseWriter, r *http.Request) {
		if err := s.gateway.restart(); err != nil {
			t.Errorf("restart gateway: %v", err)
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// startMCPServer serves an MCP server with one tool over streamable HTTP on
// 127.0.0.1, for the settings spec to add (the llm connects to it) and
// remove; it returns the server's URL.
func startMCPServer(t testing.TB) string {
	t.Helper()
	type echoIn struct {
		Text string `json:"text" jsonschema:"the text to echo"`
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "webe2e", Version: "1.0.0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echo the text back."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			if in.Text == "" {
				return nil, nil, errors.New("nothing to echo")
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	return ts.URL
}
