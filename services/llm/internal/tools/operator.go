package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"time"

	"github.com/alicia-voice/alicia/pkg/netguard"
	"github.com/alicia-voice/alicia/pkg/protocol"
)

// stdio MCP servers run a command on this host, so they come only from the
// operator's file (ALICIA_MCP_SERVERS_FILE), never from the bus or the
// database, where anyone who can publish could have put one. The file is
// read at start and again whenever its modification time or size changes
// (polled every ALICIA_MCP_SERVERS_POLL). What comes from the bus for one of
// the file's servers may only enable or disable it.

// operatorFile is the format of ALICIA_MCP_SERVERS_FILE:
//
//	{"servers": [{"name": "files", "command": "/usr/local/bin/mcp-files",
//	  "args": ["--root", "/srv"], "env": {"FILES_TOKEN": "…"}}]}
type operatorFile struct {
	Servers []operatorEntry `json:"servers"`
}

type operatorEntry struct {
	Name    string            `json:"name"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
}

var serverName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// readOperatorFile reads the operator's stdio servers by name.
func readOperatorFile(path string) (map[string]serverConfig, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: ALICIA_MCP_SERVERS_FILE: %w", ErrInvalidConfig, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var f operatorFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: ALICIA_MCP_SERVERS_FILE %s: %w", ErrInvalidConfig, path, err)
	}
	out := map[string]serverConfig{}
	var errs []error
	for _, e := range f.Servers {
		c := serverConfig{Name: e.Name, Transport: TransportStdio, Command: e.Command, Args: e.Args, Env: e.Env, Enabled: true}
		switch {
		case !serverName.MatchString(e.Name):
			errs = append(errs, fmt.Errorf("server name %q: use 1 to 64 letters, digits, - and _", e.Name))
		case out[e.Name].Name != "":
			errs = append(errs, fmt.Errorf("server %q is listed twice", e.Name))
		default:
			if err := c.validate(); err != nil {
				errs = append(errs, err)
				continue
			}
			out[e.Name] = c
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: ALICIA_MCP_SERVERS_FILE %s: %w", ErrInvalidConfig, path, err)
	}
	return out, nil
}

// fileStamp is what tells a changed file.
type fileStamp struct {
	mod  time.Time
	size int64
}

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{mod: fi.ModTime(), size: fi.Size()}, nil
}

// watchOperatorFile reloads the file when it changes, until Close.
func (r *Registry) watchOperatorFile(stamp fileStamp) {
	defer r.wg.Done()
	tick := time.NewTicker(r.cfg.MCPServersPoll)
	defer tick.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-tick.C:
		}
		now, err := stampOf(r.cfg.MCPServersFile)
		if err != nil {
			r.log.Warn().Err(err).Msg("MCP servers file unreadable; keeping the servers it listed")
			continue
		}
		if now == stamp {
			continue
		}
		stamp = now
		servers, err := readOperatorFile(r.cfg.MCPServersFile)
		if err != nil {
			r.log.Error().Err(err).Msg("MCP servers file not reloaded; keeping the servers it listed")
			continue
		}
		r.applyOperator(servers)
	}
}

// applyOperator makes servers the operator's set: new and changed servers
// are started (a running one keeps its enabled setting), removed ones
// stopped, and each change is published so persistence and the gateway
// know the server (without its env, which stays here).
func (r *Registry) applyOperator(servers map[string]serverConfig) {
	r.mu.Lock()
	old := r.operator
	r.operator = servers
	r.mu.Unlock()
	for name := range old {
		if _, ok := servers[name]; !ok {
			r.deleteServer(name)
			r.publishConfig(&protocol.MCPServerConfig{Action: protocol.MCPServerConfigActionDelete, Name: name})
		}
	}
	for _, name := range sortedKeys(servers) {
		c := servers[name]
		if prev, ok := old[name]; ok && prev.equal(c) {
			continue
		}
		c.Enabled = r.currentlyEnabled(name, true)
		r.upsertServer(c)
		r.publishOperatorServer(c)
	}
}

func sortedKeys(m map[string]serverConfig) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// publishOperatorServer announces one of the file's servers: its command
// and args (which administrators see), never its env. enabled is left out
// so the stored setting is kept.
func (r *Registry) publishOperatorServer(c serverConfig) {
	r.publishConfig(&protocol.MCPServerConfig{Action: protocol.MCPServerConfigActionUpsert, Name: c.Name,
		Transport: protocol.Ptr(protocol.MCPServerConfigTransportStdio), Command: protocol.Ptr(c.Command), Args: c.Args})
}

func (r *Registry) publishConfig(b *protocol.MCPServerConfig) {
	ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
	defer cancel()
	if _, err := r.pub.PublishSystem(ctx, protocol.New("", b), ""); err != nil && !errors.Is(err, context.Canceled) {
		r.log.Warn().Err(err).Str("mcp_server", b.Name).Msg("MCP server configuration not published")
	}
}

// currentlyEnabled is the enabled setting of a running server, or def.
func (r *Registry) currentlyEnabled(name string, def bool) bool {
	r.mu.RLock()
	s, ok := r.servers[name]
	r.mu.RUnlock()
	if !ok {
		return def
	}
	c, _ := s.desired()
	return c.Enabled
}

// applyUntrusted applies a server configuration read from the bus or the
// database. enabledSet says whether it sets enabled; without it a running
// server keeps its setting and a new one is enabled.
func (r *Registry) applyUntrusted(c serverConfig, enabledSet bool) {
	if !enabledSet {
		c.Enabled = r.currentlyEnabled(c.Name, true)
	}
	r.mu.RLock()
	op, isOperator := r.operator[c.Name]
	r.mu.RUnlock()
	if isOperator {
		if c.Transport != TransportStdio || c.Command != op.Command || !slices.Equal(c.Args, op.Args) {
			// Not the operator's server: a forgery or a stale record. The
			// running server and its status are left alone.
			r.log.Warn().Str("mcp_server", c.Name).Msg("MCP server configuration refused: the operator's server can only be enabled or disabled")
			return
		}
		op.Enabled = c.Enabled
		r.upsertServer(op)
		return
	}
	if err := r.refusal(c); err != nil {
		r.log.Warn().Err(err).Str("mcp_server", c.Name).Msg("MCP server configuration refused")
		r.publishStatus(c.Name, protocol.MCPServerStatusStatusError, err.Error())
		return
	}
	r.upsertServer(c)
}

// refusal says why a configuration that is not the operator's cannot be
// used: a stdio one never can, an http one must not name a host that is
// not public (unless allowed). The dialer checks again on every
// connection; this only gives an early, clear status.
func (r *Registry) refusal(c serverConfig) error {
	if err := c.validate(); err != nil {
		return err
	}
	switch c.Transport {
	case TransportStdio:
		if !r.cfg.MCPStdio {
			return fmt.Errorf("%w: MCP server %q: stdio servers are turned off on this server (ALICIA_MCP_STDIO)", ErrInvalidConfig, c.Name)
		}
		return fmt.Errorf("%w: MCP server %q: stdio servers come only from the operator's file (ALICIA_MCP_SERVERS_FILE)", ErrInvalidConfig, c.Name)
	case TransportHTTP:
		u, _ := url.Parse(c.URL)
		if err := r.guard.CheckLiteral(u.Hostname()); err != nil {
			return fmt.Errorf("%w: MCP server %q: %w (allow it with ALICIA_MCP_ALLOWED_HOSTS)", ErrInvalidConfig, c.Name, err)
		}
	}
	return nil
}

// newGuard is the destination check of HTTP MCP sessions.
func newGuard(cfg Config) *netguard.Guard {
	return netguard.New(cfg.MCPAllowedHosts, cfg.MCPResolver, cfg.MCPDial)
}
