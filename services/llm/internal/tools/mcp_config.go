package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// MCP transports (alicia_mcp_servers.transport).
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http"
)

// serverConfig is one MCP server as alicia_mcp_servers and MCPServerConfig
// describe it.
type serverConfig struct {
	Name      string
	Transport string
	Command   string
	Args      []string
	URL       string
	Env       map[string]string
	Enabled   bool
}

func (c serverConfig) validate() error {
	var errs []error
	if strings.TrimSpace(c.Name) == "" {
		errs = append(errs, errors.New("the server needs a name"))
	}
	switch c.Transport {
	case TransportStdio:
		if strings.TrimSpace(c.Command) == "" {
			errs = append(errs, errors.New("a stdio server needs a command"))
		}
	case TransportHTTP:
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("an http server needs an http(s) URL, not %q", c.URL))
		}
	default:
		errs = append(errs, fmt.Errorf("transport %q is not stdio or http", c.Transport))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: MCP server %q: %w", ErrInvalidConfig, c.Name, err)
	}
	return nil
}

func (c serverConfig) equal(o serverConfig) bool {
	return c.Name == o.Name && c.Transport == o.Transport && c.Command == o.Command &&
		slices.Equal(c.Args, o.Args) && c.URL == o.URL && maps.Equal(c.Env, o.Env) && c.Enabled == o.Enabled
}

// configFromEnvelope reads an upsert. Enabled defaults to true; a missing
// transport is inferred from which of url and command is set.
func configFromEnvelope(b *protocol.MCPServerConfig) serverConfig {
	c := serverConfig{Name: b.Name, Args: b.Args, Enabled: b.Enabled == nil || *b.Enabled}
	if b.Command != nil {
		c.Command = *b.Command
	}
	if b.Url != nil {
		c.URL = *b.Url
	}
	if len(b.Env) > 0 {
		c.Env = map[string]string(b.Env)
	}
	switch {
	case b.Transport != nil:
		c.Transport = string(*b.Transport)
	case c.URL != "":
		c.Transport = TransportHTTP
	default:
		c.Transport = TransportStdio
	}
	return c
}

// loadServers reads the MCP servers that are not deleted, enabled or not.
func loadServers(ctx context.Context, db Querier) ([]serverConfig, error) {
	rows, err := db.Query(ctx, `SELECT name, transport::text, coalesce(command, ''), args, coalesce(url, ''), env, enabled
		FROM alicia_mcp_servers WHERE deleted_at IS NULL ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("tools: read alicia_mcp_servers: %w", err)
	}
	defer rows.Close()
	var out []serverConfig
	for rows.Next() {
		var c serverConfig
		var env []byte
		if err := rows.Scan(&c.Name, &c.Transport, &c.Command, &c.Args, &c.URL, &env, &c.Enabled); err != nil {
			return nil, fmt.Errorf("tools: read alicia_mcp_servers: %w", err)
		}
		if c.Env, err = envMap(env); err != nil {
			return nil, fmt.Errorf("tools: alicia_mcp_servers %q env: %w", c.Name, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("tools: read alicia_mcp_servers: %w", err)
	}
	return out, nil
}

// envMap reads the env jsonb object; non-string values are kept as their JSON text.
func envMap(raw []byte) (map[string]string, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
			continue
		}
		b, _ := json.Marshal(v)
		out[k] = string(b)
	}
	return out, nil
}

// inheritedEnv are the variables a stdio server gets from the llm's own
// environment: what programs need to run (find executables, a home, a
// locale), never the llm's secrets. The server's env setting adds the rest.
var inheritedEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "SYSTEMROOT"}

// childEnv is the environment of a stdio server process.
func childEnv(extra map[string]string) []string {
	env := make([]string, 0, len(inheritedEnv)+len(extra))
	for _, k := range inheritedEnv {
		if _, override := extra[k]; override {
			continue
		}
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		env = append(env, k+"="+extra[k])
	}
	return env
}
