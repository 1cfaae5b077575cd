package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
)

// DispatchConsumer is the durable consumer every room-agent replica shares.
const DispatchConsumer = "room-agent"

// Agent takes dispatch requests off the shared AGENT_DISPATCH work queue
// and serves each room until it empties. A request stays unacknowledged
// (kept alive with in-progress heartbeats) while the agent is in the room;
// if the agent dies, the request is redelivered after the lease and
// another agent joins. The work queue holds one request per conversation,
// and the agent identity is the same in every replica, so a room never has
// two agents.
type Agent struct {
	cfg Config
	d   Deps

	mu    sync.Mutex
	rooms map[string]*Room
}

// New returns an agent.
func New(cfg Config, d Deps) *Agent {
	if d.Metrics == nil {
		d.Metrics = DefaultMetrics()
	}
	if d.Users == nil {
		d.Users = edge.NewUserRates()
	}
	if d.Accounts == nil {
		d.Accounts = edge.NewAccounts(cfg.Budgets, nil, d.Log)
	}
	return &Agent{cfg: cfg.WithDefaults(), d: d, rooms: map[string]*Room{}}
}

// Run serves dispatch requests until ctx ends; then it takes no more, and
// in each of its rooms finishes the turn being spoken, leaves the room and
// hands the request back (nak: another agent joins at once). A room is left
// without waiting for its turn once work ends (the stop was forced:
// svcmain.WorkContext; outside a drain work is ctx).
func (a *Agent) Run(ctx, work context.Context) error {
	cons, err := a.d.JS.CreateOrUpdateConsumer(ctx, bus.StreamDispatch, jetstream.ConsumerConfig{
		Durable: DispatchConsumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: a.cfg.Lease,
		MaxAckPending: -1, MaxDeliver: -1, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("agent: dispatch consumer: %w", err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, a.cfg.MaxRooms)
	for {
		select {
		case <-ctx.Done():
			return nil
		case slots <- struct{}{}:
		}
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			<-slots
			if ctx.Err() != nil {
				return nil
			}
			a.d.Log.Warn().Err(err).Msg("fetch dispatch")
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		got := false
		for m := range batch.Messages() {
			got = true
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				a.serve(ctx, work, m)
			}()
		}
		if !got {
			<-slots
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && ctx.Err() == nil {
			a.d.Log.Debug().Err(err).Msg("fetch dispatch")
		}
	}
}

// serve joins the room of one request and stays until it is done, or until
// ctx ends and the turn being spoken is over (or work ends).
func (a *Agent) serve(ctx, work context.Context, m jetstream.Msg) {
	env, err := protocol.Decode(m.Data())
	d, ok := env.Body.(*protocol.AgentDispatch)
	if err == nil && !ok {
		err = fmt.Errorf("body is %T, want an AgentDispatch", env.Body)
	}
	if err != nil {
		a.settler().Settle(ctx, m, bus.Fail(fmt.Errorf("bad dispatch request: %w", err)))
		return
	}
	log := a.d.Log.With().Str("conversation_id", d.ConversationID).Logger()
	if ctx.Err() != nil { // fetched while shutting down
		a.settler().Settle(ctx, m, bus.GiveBack())
		return
	}
	a.mu.Lock()
	_, dup := a.rooms[d.ConversationID]
	a.mu.Unlock()
	if dup { // already there (a redelivery of our own request)
		_ = m.InProgress()
		return
	}
	room, err := Join(ctx, a.cfg, a.d, d)
	if err != nil {
		a.settler().Settle(ctx, m, bus.RetryIn(time.Second, fmt.Errorf("join failed; handing the request back: %w", err)))
		return
	}
	a.mu.Lock()
	a.rooms[d.ConversationID] = room
	a.mu.Unlock()
	a.d.Metrics.Rooms.Inc()
	defer func() {
		a.mu.Lock()
		delete(a.rooms, d.ConversationID)
		a.mu.Unlock()
		a.d.Metrics.Rooms.Dec()
	}()
	go room.Watch(ctx)
	beat := time.NewTicker(a.cfg.Lease / 3)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			finished := a.finishTurn(work, room, m, beat)
			room.Close()
			a.settler().Settle(ctx, m, bus.GiveBack()) // another agent takes the room now
			log.Info().Bool("turn_finished", finished).Msg("left the room (shutdown); request handed back")
			return
		case <-room.Done():
			room.Close()
			a.settler().Settle(ctx, m, bus.Ack())
			log.Info().Msg("left the room")
			return
		case <-beat.C:
			_ = m.InProgress()
		}
	}
}

// settler settles dispatch requests (bus.Settler); one that cannot be
// read is terminated (the room-agent publishes no dead letters).
func (a *Agent) settler() *bus.Settler {
	return &bus.Settler{Consumer: DispatchConsumer, Log: a.d.Log}
}

// finishTurn waits, keeping the request's lease, until the turn being
// spoken in room has played to its end; false when work ended first (or the
// room was lost). The next turn is left to the agent that takes the room
// over: a user who speaks meanwhile is not kept waiting for this one.
func (a *Agent) finishTurn(work context.Context, room *Room, m jetstream.Msg, beat *time.Ticker) bool {
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for room.Speaking() {
		select {
		case <-work.Done():
			return false
		case <-room.Done():
			return false
		case <-beat.C:
			_ = m.InProgress()
		case <-poll.C:
		}
	}
	return true
}
