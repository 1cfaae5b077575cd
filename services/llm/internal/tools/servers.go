package tools

import (
	"fmt"
	"slices"
	"strings"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// upsertServer starts a supervisor for a new server or hands an existing
// one its new configuration. A configuration that cannot work is refused
// with an error status.
func (r *Registry) upsertServer(c serverConfig) {
	err := c.validate()
	if err == nil && c.Transport == TransportStdio && !r.cfg.MCPStdio {
		err = fmt.Errorf("%w: MCP server %q: stdio servers are turned off on this server (ALICIA_MCP_STDIO)", ErrInvalidConfig, c.Name)
	}
	if err != nil {
		r.log.Warn().Err(err).Str("mcp_server", c.Name).Msg("MCP server configuration refused")
		r.publishStatus(c.Name, protocol.MCPServerStatusStatusError, err.Error())
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx.Err() != nil {
		return
	}
	if s, ok := r.servers[c.Name]; ok {
		s.update(c)
		return
	}
	// A deleted server of the same name may still be stopping; the new one
	// waits for it, so their tools and registrations do not interleave.
	var prev <-chan struct{}
	for _, old := range r.retiring {
		if old.name == c.Name {
			prev = old.done
		}
	}
	s := newMCPServer(r, c, prev)
	r.servers[c.Name] = s
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		s.run(r.ctx)
		r.mu.Lock()
		r.retiring = slices.DeleteFunc(r.retiring, func(o *mcpServer) bool { return o == s })
		r.mu.Unlock()
	}()
}

// deleteServer disconnects a server and drops its tools.
func (r *Registry) deleteServer(name string) {
	r.mu.Lock()
	s, ok := r.servers[name]
	if ok {
		delete(r.servers, name)
		r.retiring = append(r.retiring, s)
	}
	r.mu.Unlock()
	if !ok {
		r.log.Debug().Str("mcp_server", name).Msg("delete of an MCP server not running here")
		return
	}
	s.remove()
}

// replaceTools makes tools the server's whole tool set and returns their specs.
func (r *Registry) replaceTools(s *mcpServer, tools []Tool) []Spec {
	r.mu.Lock()
	for name, e := range r.tools {
		if e.server == s {
			delete(r.tools, name)
		}
	}
	r.mu.Unlock()
	specs := make([]Spec, 0, len(tools))
	for _, t := range tools {
		_ = r.add(t, s) // an MCP tool's unusable schema only costs the local check
		specs = append(specs, t.Spec())
	}
	return specs
}

// dropTools removes every tool of the server.
func (r *Registry) dropTools(s *mcpServer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, e := range r.tools {
		if e.server == s {
			delete(r.tools, name)
		}
	}
}

// takenByOther reports whether name belongs to another source's tool.
func (r *Registry) takenByOther(name string, s *mcpServer) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.tools[name]
	return ok && e.server != s
}

// Servers returns the MCP servers and their connection state, by name.
func (r *Registry) Servers() []ServerState {
	r.mu.RLock()
	out := make([]ServerState, 0, len(r.servers))
	for _, s := range r.servers {
		out = append(out, s.state())
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b ServerState) int { return strings.Compare(a.Name, b.Name) })
	return out
}
