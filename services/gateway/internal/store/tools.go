package store

import (
	"github.com/alicia-voice/alicia/pkg/restapi"

	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Tool is a registered tool.
type Tool = restapi.Tool

const toolQuery = `SELECT t.name, t.description, t.schema, t.enabled,
	CASE WHEN t.mcp_server_id IS NULL THEN 'builtin' ELSE 'mcp:' || COALESCE(s.name, '') END
	FROM alicia_tools t LEFT JOIN alicia_mcp_servers s ON s.id = t.mcp_server_id
	WHERE t.deleted_at IS NULL`

func scanTool(row pgx.Row) (Tool, error) {
	var t Tool
	err := row.Scan(&t.Name, &t.Description, &t.Parameters, &t.Enabled, &t.Source)
	return t, err
}

// Tools lists the registered tools by name.
func (s *Store) Tools(ctx context.Context) ([]Tool, error) {
	rows, err := s.pool.Query(ctx, toolQuery+` ORDER BY t.name`)
	if err != nil {
		return nil, fmt.Errorf("store: tools: %w", err)
	}
	defer rows.Close()
	out := []Tool{}
	for rows.Next() {
		t, err := scanTool(rows)
		if err != nil {
			return nil, fmt.Errorf("store: tools: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// Tool returns the tool called name.
func (s *Store) Tool(ctx context.Context, name string) (Tool, error) {
	t, err := scanTool(s.pool.QueryRow(ctx, toolQuery+` AND t.name = $1`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return Tool{}, ErrNotFound
	}
	if err != nil {
		return Tool{}, fmt.Errorf("store: tool: %w", err)
	}
	return t, nil
}

// MCPServer is a configured MCP server. Its env is never read out: it may
// hold secrets.
type MCPServer = restapi.MCPServer

const mcpQuery = `SELECT name, transport::text, command, args, url, enabled, status::text, last_error
	FROM alicia_mcp_servers WHERE deleted_at IS NULL`

func scanMCP(row pgx.Row) (MCPServer, error) {
	var m MCPServer
	err := row.Scan(&m.Name, &m.Transport, &m.Command, &m.Args, &m.URL, &m.Enabled, &m.Status, &m.LastError)
	return m, err
}

// MCPServers lists the MCP servers by name.
func (s *Store) MCPServers(ctx context.Context) ([]MCPServer, error) {
	rows, err := s.pool.Query(ctx, mcpQuery+` ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("store: mcp servers: %w", err)
	}
	defer rows.Close()
	out := []MCPServer{}
	for rows.Next() {
		m, err := scanMCP(rows)
		if err != nil {
			return nil, fmt.Errorf("store: mcp servers: %w", err)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// MCPServer returns the MCP server called name.
func (s *Store) MCPServer(ctx context.Context, name string) (MCPServer, error) {
	m, err := scanMCP(s.pool.QueryRow(ctx, mcpQuery+` AND name = $1`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return MCPServer{}, ErrNotFound
	}
	if err != nil {
		return MCPServer{}, fmt.Errorf("store: mcp server: %w", err)
	}
	return m, nil
}
