package rest

import (
	"errors"
	"net/http"
	"net/url"
	"regexp"

	"github.com/labstack/echo/v4"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/gateway/internal/store"
)

// Tools and MCP servers are the installation's, shared by every user.

type toolsAnswer struct {
	Tools []store.Tool `json:"tools"`
}

func (a *API) listTools(c echo.Context) error {
	tools, err := a.Store.Tools(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toolsAnswer{Tools: tools})
}

// patchTool enables or disables a tool with a ToolSetting on alicia.sys.
func (a *API) patchTool(c echo.Context) error {
	name, err := pathID(c, "name")
	if err != nil {
		return err
	}
	var in struct {
		Enabled *bool `json:"enabled"`
	}
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

type mcpAnswer struct {
	Servers []store.MCPServer `json:"servers"`
}

func (a *API) listMCPServers(c echo.Context) error {
	servers, err := a.Store.MCPServers(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, mcpAnswer{Servers: servers})
}

var (
	mcpName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

// MCP server input limits.
const (
	maxArgs     = 64
	maxArg      = 1024
	maxEnv      = 64
	maxEnvValue = 4096
	maxURL      = 2048
)

type mcpInput struct {
	Transport string            `json:"transport"`
	Command   *string           `json:"command"`
	Args      []string          `json:"args"`
	URL       *string           `json:"url"`
	Env       map[string]string `json:"env"`
	Enabled   *bool             `json:"enabled"`
}

func (in mcpInput) validate() error {
	switch in.Transport {
	case "stdio":
		if in.Command == nil || *in.Command == "" {
			return fail(http.StatusBadRequest, "a stdio server needs a command")
		}
		if in.URL != nil {
			return fail(http.StatusBadRequest, "a stdio server has no url")
		}
		if err := text("command", *in.Command, maxArg, true); err != nil {
			return err
		}
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
	if len(in.Args) > maxArgs {
		return fail(http.StatusBadRequest, "at most %d args", maxArgs)
	}
	for _, arg := range in.Args {
		if err := text("an arg", arg, maxArg, false); err != nil {
			return err
		}
	}
	if len(in.Env) > maxEnv {
		return fail(http.StatusBadRequest, "at most %d env variables", maxEnv)
	}
	for k, v := range in.Env {
		if !envName.MatchString(k) {
			return fail(http.StatusBadRequest, "env name %q is not a variable name", k)
		}
		if err := text("env "+k, v, maxEnvValue, false); err != nil {
			return err
		}
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
	var in mcpInput
	if err := bindJSON(c, &in, false); err != nil {
		return err
	}
	if err := in.validate(); err != nil {
		return err
	}
	ctx := c.Request().Context()
	status := http.StatusOK
	if _, err := a.Store.MCPServer(ctx, name); errors.Is(err, store.ErrNotFound) {
		status = http.StatusCreated
	} else if err != nil {
		return err
	}
	transport := protocol.MCPServerConfigTransport(in.Transport)
	cfg := &protocol.MCPServerConfig{Action: protocol.MCPServerConfigActionUpsert, Name: name, Transport: &transport,
		Command: in.Command, Args: in.Args, Url: in.URL, Env: in.Env, Enabled: in.Enabled}
	if err := a.write(c, asSystem(cfg)); err != nil {
		return err
	}
	s, err := a.Store.MCPServer(ctx, name)
	if err != nil {
		return lookup(err, "MCP server")
	}
	return c.JSON(status, s)
}

func (a *API) deleteMCPServer(c echo.Context) error {
	name := c.Param("name")
	if !mcpName.MatchString(name) {
		return fail(http.StatusBadRequest, "server name %q: use 1 to 64 letters, digits, - and _", name)
	}
	if _, err := a.Store.MCPServer(c.Request().Context(), name); err != nil {
		return lookup(err, "MCP server")
	}
	if err := a.write(c, asSystem(&protocol.MCPServerConfig{Action: protocol.MCPServerConfigActionDelete, Name: name})); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
