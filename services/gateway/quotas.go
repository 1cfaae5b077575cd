package gateway

import (
	"errors"
	"fmt"

	"github.com/alicia-voice/alicia/pkg/backlog"
	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/edge"
)

// Quotas bound what one user may hold or send beyond the HTTP request
// rate (RateLimit), which counts nothing after a WebSocket upgrade.
type Quotas struct {
	// Edge bounds the envelopes of a WebSocket: per connection and per
	// user (over all of the user's connections to this replica), and the
	// client meta (ALICIA_EDGE_*, ALICIA_CLIENT_META_*; see edge.Limits).
	Edge edge.Limits
	// ConnectionsPerUser bounds a user's open WebSockets on one gateway
	// replica (ALICIA_WS_CONNECTIONS_PER_USER, default 8; 429 beyond), and
	// apart from them the user's open timeline streams (GET
	// /v1/conversations/{id}/timeline/stream): a debug view never costs
	// the user a chat connection.
	ConnectionsPerUser int
	// RoomsPerUser bounds the voice rooms a user has asked an agent for or
	// an agent holds, over all replicas (ALICIA_ROOMS_PER_USER, default 3;
	// GET /v1/conversations/{id}/token answers 429 beyond).
	RoomsPerUser int
	// Budgets bound what a user may send and keep in bytes and work
	// (ALICIA_BUDGET_*; see edge.Budgets and the table in the README).
	Budgets edge.Budgets
	// BacklogLimit: the share of CONVERSATIONS' size the envelopes
	// persistence has not applied may take before client input is
	// refused (ALICIA_STREAM_BACKLOG_LIMIT, default 0.5; pkg/backlog).
	BacklogLimit float64
}

// DefaultQuotas returns the defaults.
func DefaultQuotas() Quotas {
	return Quotas{Edge: edge.DefaultLimits(), ConnectionsPerUser: 8, RoomsPerUser: 3, Budgets: edge.DefaultBudgets(), BacklogLimit: backlog.DefaultLimit}
}

// QuotasFromEnv is QuotasFrom(config.Environ()).
func (c *Config) QuotasFromEnv() error { return c.QuotasFrom(config.Environ()) }

// QuotasFrom overrides c.Quotas from src.
func (c *Config) QuotasFrom(src config.Source) error {
	var limitErr error
	if src.IsSet(backlog.EnvLimit) {
		c.Quotas.BacklogLimit, limitErr = backlog.LimitFrom(src)
	}
	return errors.Join(
		limitErr,
		c.Quotas.Edge.From(src),
		c.Quotas.Budgets.From(src),
		src.Int("ALICIA_WS_CONNECTIONS_PER_USER", &c.Quotas.ConnectionsPerUser),
		src.Int("ALICIA_ROOMS_PER_USER", &c.Quotas.RoomsPerUser),
	)
}

func (q Quotas) validate() error {
	var errs []error
	if err := q.Edge.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := q.Budgets.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := (backlog.Config{Limit: q.BacklogLimit}).Validate(); err != nil {
		errs = append(errs, err)
	}
	if q.ConnectionsPerUser < 1 {
		errs = append(errs, fmt.Errorf("ALICIA_WS_CONNECTIONS_PER_USER %d: want ≥ 1", q.ConnectionsPerUser))
	}
	if q.RoomsPerUser < 1 {
		errs = append(errs, fmt.Errorf("ALICIA_ROOMS_PER_USER %d: want ≥ 1", q.RoomsPerUser))
	}
	return errors.Join(errs...)
}
