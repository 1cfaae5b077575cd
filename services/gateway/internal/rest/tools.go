package rest

import (
	"github.com/alicia-voice/alicia/pkg/restapi"

	"context"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/alicia-voice/alicia/pkg/netguard"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/gateway/internal/auth"
	"github.com/alicia-voice/alicia/services/gateway/internal/store"
)

// Tools and MCP servers are the installation's, shared by every user;
// only administrators change them or see how servers are reached. stdio
// servers run a command on the llm host, so they come only from the
// operator's file (ALICIA_MCP_SERVERS_FILE on the llm): the API enables and
// disables them, never creates, changes or removes one.

func (a *API) listTools(c echo.Context) error {
	tools, err := a.Store.Tools(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, restapi.ToolList{Tools: tools})
}

// patchTool enables or disables a tool with a ToolSetting on alicia.sys.
func (a *API) patchTool(c echo.Context) error {
	name, err := pathID(c, "name")
	if err != nil {
		return err
	}
	var in restapi.EnabledPatch
	if err := bindJSON(c, &in, false); err != nil {
		return err
	}
	if in.Enabled == nil {
		return fail(http.StatusBadRequest, "enabled (true or false) is required")
	}
	ctx := c.Request().Context()
	if _, err := a.Store.Tool(ctx, name); err != nil {
		return lookup(err, "tool")
	}
	if err := a.write(c, asSystem(&protocol.ToolSetting{Name: name, Enabled: *in.Enabled})); err != nil {
		return err
	}
	t, err := a.Store.Tool(ctx, name)
	if err != nil {
		return lookup(err, "tool")
	}
	return c.JSON(http.StatusOK, t)
}

func (a *API) listMCPServers(c echo.Context) error {
	servers, err := a.Store.MCPServers(c.Request().Context())
	if err != nil {
		return err
	}
	if !auth.IsAdmin(c) {
		for i := range servers {
			servers[i] = public(servers[i])
		}
	}
	return c.JSON(http.StatusOK, restapi.MCPServerList{Servers: servers})
}

// public is what a user who is not an administrator sees of a server: its
// name, transport, setting and status, not how it is reached (command,
// args, URL) nor its last error, which may name internal addresses.
func public(s store.MCPServer) store.MCPServer {
	s.Command, s.Args, s.URL, s.LastError = nil, nil, nil, nil
	return s
}

// errOperatorStdio answers any attempt to create or change a stdio server.
var errOperatorStdio = fail(http.StatusBadRequest,
	"stdio MCP servers come only from the operator's file (ALICIA_MCP_SERVERS_FILE of the llm service); "+
		"the API can only enable or disable one (PATCH /v1/mcp-servers/{name})")

var mcpName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// maxURL bounds an MCP server's URL.
const maxURL = 2048

// validMCPServer checks a PUT's server: http only, with a URL.
func validMCPServer(in restapi.MCPServerPut) error {
	switch in.Transport {
	case "stdio":
		return errOperatorStdio
	case "http":
		if in.URL == nil || *in.URL == "" {
			return fail(http.StatusBadRequest, "an http server needs a url")
		}
		if in.Command != nil || len(in.Args) > 0 {
			return fail(http.StatusBadRequest, "an http server has no command or args")
		}
		u, err := url.Parse(*in.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(*in.URL) > maxURL {
			return fail(http.StatusBadRequest, "url must be an http(s) URL of at most %d characters", maxURL)
		}
	default:
		return fail(http.StatusBadRequest, "transport must be stdio or http")
	}
	if in.Env != nil {
		return fail(http.StatusBadRequest, "env is for stdio servers (the operator's file); an http server has none")
	}
	return nil
}

// checkHost refuses an http server's host that is not a public address,
// unless the operator allowed it (ALICIA_MCP_ALLOWED_HOSTS). The llm checks
// again on every address it dials; this is the early answer.
func (a *API) checkHost(ctx context.Context, raw string) error {
	u, _ := url.Parse(raw)
	g := netguard.New(a.MCPAllowedHosts, a.Resolver, nil)
	host := u.Hostname()
	if err := g.CheckLiteral(host); err != nil {
		return fail(http.StatusBadRequest, "url host %s is not a public address; an administrator of the deployment can allow it with ALICIA_MCP_ALLOWED_HOSTS", host)
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	// A name that does not resolve here is left to the llm, which checks
	// what it dials.
	if _, err := g.Check(rctx, host); errors.Is(err, netguard.ErrRefused) {
		return fail(http.StatusBadRequest, "url host %s resolves to an address that is not public; an administrator of the deployment can allow it with ALICIA_MCP_ALLOWED_HOSTS", host)
	}
	return nil
}

// putMCPServer adds or replaces an MCP server (MCPServerConfig upsert); the
// llm service connects to it and reports its status. Without "enabled" a new
// server is enabled and an existing one keeps its setting.
func (a *API) putMCPServer(c echo.Context) error {
	name := c.Param("name")
	if !mcpName.MatchString(name) {
		return fail(http.StatusBadRequest, "server name %q: use 1 to 64 letters, digits, - and _", name)
	}
	var in restapi.MCPServerPut
	if err := bindJSON(c, &in, false); err != nil {
		return err
	}
	if err := validMCPServer(in); err != nil {
		return err
	}
	ctx := c.Request().Context()
	status := http.StatusOK
	if old, err := a.Store.MCPServer(ctx, name); errors.Is(err, store.ErrNotFound) {
		status = http.StatusCreated
	} else if err != nil {
		return err
	} else if old.Transport == "stdio" {
		return errOperatorStdio
	}
	if err := a.checkHost(ctx, *in.URL); err != nil {
		return err
	}
	transport := protocol.MCPServerConfigTransport(in.Transport)
	cfg := &protocol.MCPServerConfig{Action: protocol.MCPServerConfigActionUpsert, Name: name, Transport: &transport,
		Url: in.URL, Enabled: in.Enabled}
	if err := a.write(c, asSystem(cfg)); err != nil {
		return err
	}
	s, err := a.Store.MCPServer(ctx, name)
	if err != nil {
		return lookup(err, "MCP server")
	}
	return c.JSON(status, s)
}

// patchMCPServer enables or disables a server, the operator's stdio ones
// included: the same configuration again with the new setting.
func (a *API) patchMCPServer(c echo.Context) error {
	name := c.Param("name")
	if !mcpName.MatchString(name) {
		return fail(http.StatusBadRequest, "server name %q: use 1 to 64 letters, digits, - and _", name)
	}
	var in restapi.EnabledPatch
	if err := bindJSON(c, &in, false); err != nil {
		return err
	}
	if in.Enabled == nil {
		return fail(http.StatusBadRequest, "enabled (true or false) is required")
	}
	ctx := c.Request().Context()
	old, err := a.Store.MCPServer(ctx, name)
	if err != nil {
		return lookup(err, "MCP server")
	}
	transport := protocol.MCPServerConfigTransport(old.Transport)
	cfg := &protocol.MCPServerConfig{Action: protocol.MCPServerConfigActionUpsert, Name: name, Transport: &transport,
		Command: old.Command, Args: old.Args, Url: old.URL, Enabled: in.Enabled}
	if err := a.write(c, asSystem(cfg)); err != nil {
		return err
	}
	s, err := a.Store.MCPServer(ctx, name)
	if err != nil {
		return lookup(err, "MCP server")
	}
	return c.JSON(http.StatusOK, s)
}

func (a *API) deleteMCPServer(c echo.Context) error {
	name := c.Param("name")
	if !mcpName.MatchString(name) {
		return fail(http.StatusBadRequest, "server name %q: use 1 to 64 letters, digits, - and _", name)
	}
	old, err := a.Store.MCPServer(c.Request().Context(), name)
	if err != nil {
		return lookup(err, "MCP server")
	}
	if old.Transport == "stdio" {
		return errOperatorStdio
	}
	if err := a.write(c, asSystem(&protocol.MCPServerConfig{Action: protocol.MCPServerConfigActionDelete, Name: name})); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
