package rest

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/alicia-voice/alicia/services/gateway/internal/probe"
)

// Pinger answers when Postgres does.
type Pinger interface {
	Ping(ctx context.Context) error
}

type serverInfo struct {
	Connection connection              `json:"connection"`
	Models     map[string]probe.Status `json:"models"`
	MCPServers []mcpStatus             `json:"mcpServers"`
}

type connection struct {
	// Status: connected (NATS and Postgres answer), degraded (Postgres does
	// not) or disconnected (NATS is not connected).
	Status string `json:"status"`
	// LatencyMs is the gateway's round trip to NATS, in whole milliseconds
	// rounded up.
	LatencyMs int64  `json:"latencyMs"`
	Error     string `json:"error,omitempty"`
}

type mcpStatus struct {
	Name   string `json:"name"`
	Status string `json:"status"`
}

// serverInfo reports what is really reachable right now: the bus, Postgres,
// each model backend (probed) and the MCP servers' last known status.
func (a *API) serverInfo(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 5*time.Second)
	defer cancel()
	var (
		wg     sync.WaitGroup
		models map[string]probe.Status
		conn   connection
	)
	wg.Go(func() { models = a.Probe.Check(ctx) })
	wg.Go(func() { conn = a.connection(ctx) })
	wg.Wait()
	info := serverInfo{Connection: conn, Models: models, MCPServers: []mcpStatus{}}
	if conn.Status != "degraded" {
		servers, err := a.Store.MCPServers(ctx)
		if err != nil {
			return err
		}
		for _, s := range servers {
			info.MCPServers = append(info.MCPServers, mcpStatus{Name: s.Name, Status: s.Status})
		}
	}
	return c.JSON(http.StatusOK, info)
}

func (a *API) connection(ctx context.Context) connection {
	if !a.NC.IsConnected() {
		return connection{Status: "disconnected", Error: "NATS is not connected"}
	}
	rtt, err := a.NC.RTT()
	if err != nil {
		return connection{Status: "disconnected", Error: "NATS: " + err.Error()}
	}
	conn := connection{Status: "connected", LatencyMs: (rtt.Microseconds() + 999) / 1000}
	if err := a.Pinger.Ping(ctx); err != nil {
		conn.Status, conn.Error = "degraded", "Postgres: "+err.Error()
	}
	return conn
}
