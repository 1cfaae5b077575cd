package speech

import (
	"context"
	"fmt"
	"time"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
)

// Orphans are sentences whose turn no replica here holds (yet): every
// replica hears every sentence, and a sentence may beat its StartAnswer,
// which comes through JetStream. A turn taken within orphanTTL claims them.
const (
	orphanTTL = 10 * time.Second
	orphanMax = 20000
)

type orphan struct {
	s  sentence
	at time.Time
}

// listen subscribes every replica, on core NATS, to the sentences, answer
// starts and errors of every conversation; each is routed to the turn it
// belongs to when this replica speaks it. Core NATS delivers as soon as the
// llm publishes, without waiting for JetStream to store, and needs no
// consumer per turn (a stream allows 1,000 by default).
// stopAhead drops the queue subscription to sentences to synthesise ahead
// (a draining replica takes none), keeping the routes of the turns it holds.
func (sp *Speaker) listen() (unsubscribe, stopAhead func(), err error) {
	subs, err := sp.routes().Subscribe(context.Background(), sp.d.NC)
	if err != nil {
		return nil, nil, fmt.Errorf("speech: %w", err)
	}
	return subs.Close, func() { subs.Unsubscribe(routeAhead) }, nil
}

// routeAhead is the route of the sentences to synthesise ahead.
const routeAhead = "spec_speak"

// routes is the tts's core-NATS route table.
func (sp *Speaker) routes() *bus.Routes {
	// A burst must not make the connection drop messages.
	limits := bus.PendingLimits(1<<20, 256<<20)
	rt := bus.NewRoutes("tts", sp.d.Log)
	bus.On(rt, "control_stop", subjects.AllOfType(subjects.OriginClient, protocol.TypeControlStop), sp.onStop, limits, bus.ConversationSubject())
	bus.On(rt, "sentence", subjects.AllOfType(subjects.OriginServer, protocol.TypeAssistantSentence), sp.onSentence, limits)
	bus.On(rt, "start_answer", subjects.AllOfType(subjects.OriginServer, protocol.TypeStartAnswer), sp.onStart, limits, bus.ConversationSubject())
	bus.On(rt, "error", subjects.AllOfType(subjects.OriginServer, protocol.TypeErrorMessage), sp.onError, limits)
	if sp.d.Prefs != nil {
		// A conversation's or person's new voice applies from the next sentence.
		sp.d.Prefs.Route(rt)
	}
	if sp.ahead != nil {
		// One replica synthesises a sentence ahead; every replica hears
		// the cancellations (the one holding the entry drops it).
		bus.On(rt, routeAhead, subjects.AllSpecSpeak, sp.onSpecSpeak, limits, bus.Queue(AheadQueue), bus.SpecSubject())
		bus.On(rt, "turn_event", subjects.AllOfType(subjects.OriginAgent, protocol.TypeTurnEvent), sp.onTurnEvent, limits, bus.ConversationSubject())
	}
	return rt
}

func (sp *Speaker) onSentence(_ context.Context, env protocol.Envelope, b *protocol.AssistantSentence, _ bus.Inbound) error {
	s := sentence{env: env, body: b, id: sentenceID(b), received: time.Now()}
	st := sp.stops
	st.mu.Lock()
	defer st.mu.Unlock()
	if t := st.byID[b.PreviousID]; t != nil {
		t.deliver(s)
		return nil
	}
	now := s.received
	if len(st.orphans) >= orphanMax {
		kept := st.orphans[:0]
		for _, o := range st.orphans {
			if now.Sub(o.at) < orphanTTL/2 {
				kept = append(kept, o)
			}
		}
		clear(st.orphans[len(kept):])
		st.orphans = kept[:min(len(kept), orphanMax-1)]
	}
	st.orphans = append(st.orphans, orphan{s: s, at: now})
	return nil
}

// onStart ends the reading of the conversation's older turn here: the llm
// answers one message at a time, so it is done with that one.
func (sp *Speaker) onStart(_ context.Context, _ protocol.Envelope, sa *protocol.StartAnswer, in bus.Inbound) error {
	st := sp.stops
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, t := range st.byID {
		if t.cid == in.Conversation && t.id != sa.ID {
			t.end()
		}
	}
	return nil
}

// onError ends the reading of a turn the llm gave up on.
func (sp *Speaker) onError(_ context.Context, _ protocol.Envelope, e *protocol.ErrorMessage, _ bus.Inbound) error {
	if e.OriginatingID == nil {
		return nil // not about a turn
	}
	st := sp.stops
	st.mu.Lock()
	defer st.mu.Unlock()
	if t := st.byID[*e.OriginatingID]; t != nil {
		t.end()
	}
	return nil
}

// claimOrphans hands t the sentences that arrived before it was taken;
// st.mu is held.
func (st *stops) claimOrphans(t *turn) {
	kept := st.orphans[:0]
	now := time.Now()
	for _, o := range st.orphans {
		switch {
		case o.s.body.PreviousID == t.id:
			t.deliver(o.s)
		case now.Sub(o.at) < orphanTTL:
			kept = append(kept, o)
		}
	}
	clear(st.orphans[len(kept):])
	st.orphans = kept
}

// deliver hands t a sentence without blocking the subscription; a full
// inbox drops it, and the turn finds it in the stream when it sees the gap
// or goes quiet.
func (t *turn) deliver(s sentence) {
	select {
	case t.inbox <- s:
	default:
	}
}

// end tells t that no more sentences will come (a newer answer, or the
// llm's error for this one).
func (t *turn) end() {
	select {
	case t.over <- struct{}{}:
	default:
	}
}
