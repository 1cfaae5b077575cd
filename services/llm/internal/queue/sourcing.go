package queue

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
)

// Subjects of the source watch: the JetStream advisories of a new stream
// leader, and the request that makes LLM_TURNS's leader step down.
const (
	advisoryLeaderElected = "$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED."
	// ConversationsLeaderElected is published when CONVERSATIONS has a new leader.
	ConversationsLeaderElected = advisoryLeaderElected + bus.StreamConversations
	// TurnsLeaderElected is published when LLM_TURNS has a new leader.
	TurnsLeaderElected = advisoryLeaderElected + Stream
	// StepDownSubject asks LLM_TURNS's leader to step down.
	StepDownSubject = "$JS.API.STREAM.LEADER.STEPDOWN." + Stream
)

// SourceWatch keeps LLM_TURNS sourcing CONVERSATIONS after a leader change
// in a cluster.
//
// LLM_TURNS's leader sources CONVERSATIONS through an ephemeral consumer
// that lives on CONVERSATIONS's leader. When that server goes, the consumer
// goes with it, and a LLM_TURNS leader on another server notices only at
// its source health check (nats-server v2.15: a 10 s ticker, the source
// declared stalled after 10 s without a heartbeat), so turns wait 10–20 s.
// A new LLM_TURNS leader, though, sets up its source at once, from the
// CONVERSATIONS sequence it has stored (the stream's replicated sources
// state, so nothing is skipped or sourced twice).
//
// So after a leader change of either stream (the JetStream advisories), and
// after the connection reconnects (an advisory may have been missed), the
// watch reads LLM_TURNS's source every Poll for Window: a source that has
// not been heard from for Stall (it heartbeats every second), or not set up
// 2×Stall after the change, is stalled, and the watch asks LLM_TURNS's
// leader to step down. Every replica watches; each waits a random fraction of Poll
// and checks again before acting, so one of them usually acts and the
// others see the new leader; consecutive step-downs without the source
// recovering in between are spaced at twice the previous gap.
//
// While CONVERSATIONS has no leader, no LLM_TURNS leader can source it, and
// a new one that tries meets nats-server's retry back-off (seconds per
// failure): the watch does not step down then, and a new CONVERSATIONS
// leader starts the spacing afresh, so the first stall seen after it is
// acted on at once. On a single server there are no advisories and the
// watch does nothing.
type SourceWatch struct {
	NC     *nats.Conn
	JS     jetstream.JetStream
	Stall  time.Duration // default 1.5 s
	Window time.Duration // default 10 s
	Poll   time.Duration // default 250 ms
	Log    zerolog.Logger

	mu        sync.Mutex
	stepDowns int
}

// StepDowns is how many times the watch asked LLM_TURNS's leader to step down.
func (w *SourceWatch) StepDowns() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stepDowns
}

// sourceState is what one read of LLM_TURNS says about its source.
type sourceState struct {
	leader string
	active time.Duration // since the source was last heard from; < 0: not set up
}

// Run watches until ctx ends.
func (w *SourceWatch) Run(ctx context.Context) error {
	stall, window, poll := w.Stall, w.Window, w.Poll
	if stall <= 0 {
		stall = 1500 * time.Millisecond
	}
	if window <= 0 {
		window = 10 * time.Second
	}
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	// events carries whether the advisory was CONVERSATIONS's.
	events := make(chan bool, 2)
	rt := bus.NewRoutes("llm-sources", w.Log)
	for route, subject := range map[string]string{"conversations_leader": ConversationsLeaderElected, "turns_leader": TurnsLeaderElected} {
		conversations := subject == ConversationsLeaderElected
		bus.OnDecoded(rt, route, subject, bus.Raw, func(context.Context, []byte, bus.Inbound) error {
			select {
			case events <- conversations:
			default:
			}
			return nil
		})
	}
	subs, err := rt.Subscribe(ctx, w.NC)
	if err != nil {
		return err
	}
	defer subs.Close()

	t := time.NewTicker(poll)
	defer t.Stop()
	var (
		changed, until time.Time // the last leader change (or step-down), the end of the watch
		lastStepDown   time.Time
		gap            = stall // between two step-downs
		reconnects     = w.NC.Stats().Reconnects
	)
	arm := func(now time.Time) {
		changed, until = now, now.Add(window)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case conversations := <-events:
			arm(time.Now())
			if conversations {
				lastStepDown, gap = time.Time{}, stall
			}
			continue
		case <-t.C:
		}
		now := time.Now()
		if r := w.NC.Stats().Reconnects; r != reconnects {
			reconnects = r
			arm(now)
		}
		if now.After(until) {
			continue
		}
		st, err := w.read(ctx, poll*4)
		if err != nil {
			continue // no leader yet (of either stream), or the connection is away
		}
		if st.active >= 0 && st.active < stall {
			gap = stall // heard from: sourcing
			continue
		}
		if st.active < 0 && now.Sub(changed) < 2*stall {
			continue // a new leader setting its source up
		}
		if now.Sub(lastStepDown) < gap {
			continue
		}
		// Another replica may be acting on the same reading: wait a little
		// and look again.
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(rand.N(poll)):
		}
		again, err := w.read(ctx, poll*4)
		if err != nil || again.leader != st.leader || (again.active >= 0 && again.active < stall) {
			continue
		}
		err = w.stepDown(ctx, poll*8)
		now = time.Now()
		lastStepDown, gap = now, min(2*gap, window)
		if err != nil {
			w.Log.Warn().Err(err).Str("leader", st.leader).Msg("turn queue: asking LLM_TURNS's leader to step down")
			continue
		}
		w.Log.Warn().Str("leader", st.leader).Dur("silent", again.active).
			Msg("turn queue: LLM_TURNS stopped sourcing CONVERSATIONS after a leader change; its leader was asked to step down")
		w.mu.Lock()
		w.stepDowns++
		w.mu.Unlock()
		arm(now)
	}
}

// read reads LLM_TURNS's leader and the state of its CONVERSATIONS source.
func (w *SourceWatch) read(ctx context.Context, timeout time.Duration) (sourceState, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	s, err := w.JS.Stream(ctx, Stream)
	if err != nil {
		return sourceState{}, err
	}
	info := s.CachedInfo()
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return sourceState{}, errors.New("no leader")
	}
	// Without a CONVERSATIONS leader there is nothing to source from: a
	// step-down would only put the next LLM_TURNS leader into the back-off.
	conv, err := w.JS.Stream(ctx, bus.StreamConversations)
	if err != nil {
		return sourceState{}, err
	}
	if ci := conv.CachedInfo(); ci.Cluster == nil || ci.Cluster.Leader == "" {
		return sourceState{}, errors.New("no CONVERSATIONS leader")
	}
	for _, src := range info.Sources {
		if src != nil && src.Name == bus.StreamConversations {
			return sourceState{leader: info.Cluster.Leader, active: src.Active}, nil
		}
	}
	return sourceState{}, errors.New("no source")
}

// stepDown asks LLM_TURNS's leader to step down; another replica is elected.
func (w *SourceWatch) stepDown(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	m, err := w.NC.RequestWithContext(ctx, StepDownSubject, nil)
	if err != nil {
		return err
	}
	var resp struct {
		Success bool `json:"success"`
		Error   *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return err
	}
	if resp.Error != nil {
		return errors.New(resp.Error.Description)
	}
	if !resp.Success {
		return errors.New("step-down not done")
	}
	return nil
}
