package rpc

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// The room-agents register as the micro service VoiceAgentService (no
// endpoint: only the service's own $SRV.PING/INFO/STATS), with the voice
// activity detector they listen with in the service's metadata: the
// gateway's server-info lists the instances that answer.
const (
	VoiceAgentService = "alicia-room-agent"
	// MetaVAD is "neural" or "energy"; MetaVADDetail says which model, or
	// why the fallback listens.
	MetaVAD       = "vad"
	MetaVADDetail = "vad_detail"
)

// VoiceAgentInfoSubject is where every room-agent answers its INFO.
var VoiceAgentInfoSubject = "$SRV.INFO." + VoiceAgentService

// AddVoiceAgent registers a room-agent instance; stop unregisters it.
func AddVoiceAgent(nc *nats.Conn, version, vad, detail string) (stop func(), err error) {
	svc, err := micro.AddService(nc, micro.Config{Name: VoiceAgentService, Version: version,
		Description: "Alicia room-agent: joins LiveKit rooms as alicia-agent",
		Metadata:    map[string]string{MetaVAD: vad, MetaVADDetail: detail}})
	if err != nil {
		return nil, err
	}
	// The service answers once the server holds its subscriptions: flushed
	// here, an INFO request sent right after this returns (from any
	// connection) reaches it.
	if err := nc.Flush(); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	// Likewise, once stop returns it no longer answers.
	return func() { _ = svc.Stop(); _ = nc.Flush() }, nil
}

// VoiceAgent is one instance that answered.
type VoiceAgent struct {
	ID, VAD, VADDetail string
}

// VoiceAgents asks every room-agent for its INFO and gathers the answers
// that come within wait (or until ctx ends), sorted by id. None running is
// an empty list, not an error.
func VoiceAgents(ctx context.Context, nc *nats.Conn, wait time.Duration) ([]VoiceAgent, error) {
	inbox := nc.NewInbox()
	ch := make(chan *nats.Msg, 64)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(VoiceAgentInfoSubject, inbox, nil); err != nil {
		return nil, err
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var out []VoiceAgent
	for {
		select {
		case m := <-ch:
			var info micro.Info
			if json.Unmarshal(m.Data, &info) != nil || info.Name != VoiceAgentService {
				continue
			}
			out = append(out, VoiceAgent{ID: info.ID, VAD: info.Metadata[MetaVAD], VADDetail: info.Metadata[MetaVADDetail]})
		case <-timer.C:
			slices.SortFunc(out, func(a, b VoiceAgent) int { return strings.Compare(a.ID, b.ID) })
			return out, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
