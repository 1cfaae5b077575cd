package tools

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/clip"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/subjects"
)

// appliedWait bounds how long the start waits for persistence to catch up
// with the SYSTEM stream before reading Postgres.
const appliedWait = 3 * time.Second

// follow loads the enabled flags and the MCP servers and starts consuming
// the ToolSetting and MCPServerConfig envelopes published after that.
//
// Order matters: the SYSTEM stream's last sequence is read first, then
// Postgres, then an ordered consumer starts right after that sequence, so
// an envelope is either in the rows read or delivered (re-applying one that
// is in both is harmless). When persistence answers, the start waits until
// it has applied the stream up to that sequence, so the rows hold every
// earlier envelope.
func (r *Registry) follow(ctx context.Context, js jetstream.JetStream, db Querier) ([]serverConfig, error) {
	stream, err := js.Stream(ctx, bus.StreamSystem)
	if err != nil {
		return nil, fmt.Errorf("tools: stream %s: %w", bus.StreamSystem, err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("tools: stream %s: %w", bus.StreamSystem, err)
	}
	last := info.State.LastSeq
	if last > 0 {
		wctx, cancel := context.WithTimeout(ctx, appliedWait)
		err := rpc.WaitApplied(wctx, r.nc, bus.StreamSystem, last)
		cancel()
		if err != nil {
			r.log.Warn().Err(err).Uint64("sequence", last).Msg("persistence did not confirm the SYSTEM stream is applied; reading tool settings as stored")
		}
	}
	enabled, err := loadEnabled(ctx, db)
	if err != nil {
		return nil, err
	}
	servers, err := loadServers(ctx, db)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	for name, on := range enabled {
		r.enabled[name] = on
	}
	r.mu.Unlock()

	// One ordered consumer per type: the llm's NATS user may create
	// consumers on SYSTEM with these single filters only (pkg/natsauth).
	// The two types change separate state (the enabled flags, the MCP
	// servers), so each keeping its own order is the order that matters.
	for _, subject := range []string{subjects.System(protocol.TypeToolSetting), subjects.System(protocol.TypeMCPServerConfig)} {
		cons, err := js.OrderedConsumer(ctx, bus.StreamSystem, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{subject},
			DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
			OptStartSeq:    last + 1,
		})
		if err != nil {
			r.stopConsumers()
			return nil, fmt.Errorf("tools: consumer on %s: %w", bus.StreamSystem, err)
		}
		cc, err := cons.Consume(r.handleSystem, bus.FollowOpts()...) // recreated within ~2 s after a server loss
		if err != nil {
			r.stopConsumers()
			return nil, fmt.Errorf("tools: consume %s: %w", bus.StreamSystem, err)
		}
		r.consumers = append(r.consumers, cc)
	}
	return servers, nil
}

func (r *Registry) handleSystem(msg jetstream.Msg) {
	env, err := protocol.Decode(msg.Data())
	if err != nil {
		r.log.Warn().Err(err).Str("subject", msg.Subject()).Msg("undecodable system envelope ignored")
		return
	}
	switch b := env.Body.(type) {
	case *protocol.ToolSetting:
		r.mu.Lock()
		r.enabled[b.Name] = b.Enabled
		r.mu.Unlock()
		r.log.Info().Str("tool", b.Name).Bool("enabled", b.Enabled).Msg("tool setting")
	case *protocol.MCPServerConfig:
		if b.Action == protocol.MCPServerConfigActionDelete {
			r.mu.RLock()
			_, isOperator := r.operator[b.Name]
			r.mu.RUnlock()
			if isOperator {
				r.log.Warn().Str("mcp_server", b.Name).Msg("delete of the operator's MCP server refused: remove it from ALICIA_MCP_SERVERS_FILE")
				return
			}
			r.deleteServer(b.Name)
			return
		}
		r.applyUntrusted(configFromEnvelope(b), b.Enabled != nil)
	}
}

// loadEnabled reads alicia_tools' enabled flags.
func loadEnabled(ctx context.Context, db Querier) (map[string]bool, error) {
	rows, err := db.Query(ctx, `SELECT name, enabled FROM alicia_tools WHERE deleted_at IS NULL`)
	if err != nil {
		return nil, fmt.Errorf("tools: read alicia_tools: %w", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var name string
		var on bool
		if err := rows.Scan(&name, &on); err != nil {
			return nil, fmt.Errorf("tools: read alicia_tools: %w", err)
		}
		out[name] = on
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("tools: read alicia_tools: %w", err)
	}
	return out, nil
}

// publishStatus publishes an MCPServerStatus. It outlives Close by a
// moment, so the last "disconnected" gets out.
func (r *Registry) publishStatus(name string, status protocol.MCPServerStatusStatus, lastError string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	body := &protocol.MCPServerStatus{Name: name, Status: status}
	if lastError != "" {
		body.LastError = protocol.Ptr(clip.Bytes(lastError, 1000))
	}
	if _, err := r.pub.PublishSystem(ctx, protocol.New("", body), ""); err != nil && !errors.Is(err, context.Canceled) {
		r.log.Warn().Err(err).Str("mcp_server", name).Msg("MCP server status not published")
	}
}
