package speech

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

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
	var subs []*nats.Subscription
	var ahead *nats.Subscription
	unsubscribe = func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
	}
	stopAhead = func() {
		if ahead != nil {
			_ = ahead.Unsubscribe()
		}
	}
	type route struct {
		subject, queue string
		fn             nats.MsgHandler
	}
	routes := []route{
		{subjects.AllOfType(subjects.OriginClient, protocol.TypeControlStop), "", sp.onStop},
		{subjects.AllOfType(subjects.OriginServer, protocol.TypeAssistantSentence), "", sp.onSentence},
		{subjects.AllOfType(subjects.OriginServer, protocol.TypeStartAnswer), "", sp.onStart},
		{subjects.AllOfType(subjects.OriginServer, protocol.TypeErrorMessage), "", sp.onError},
	}
	if sp.ahead != nil {
		// One replica synthesises a sentence ahead; every replica hears
		// the cancellations (the one holding the entry drops it).
		routes = append(routes,
			route{subjects.AllSpecSpeak, AheadQueue, sp.onSpecSpeak},
			route{subjects.AllOfType(subjects.OriginAgent, protocol.TypeTurnEvent), "", sp.onTurnEvent})
	}
	for _, r := range routes {
		s, err := sp.d.NC.QueueSubscribe(r.subject, r.queue, r.fn)
		if err != nil {
			unsubscribe()
			return nil, nil, fmt.Errorf("speech: subscribe %s: %w", r.subject, err)
		}
		if r.queue != "" {
			ahead = s
		}
		// A burst must not make the connection drop messages.
		_ = s.SetPendingLimits(1<<20, 256<<20)
		subs = append(subs, s)
	}
	return unsubscribe, stopAhead, sp.d.NC.Flush()
}

func (sp *Speaker) onSentence(m *nats.Msg) {
	env, err := protocol.Decode(m.Data)
	if err != nil {
		return
	}
	b, ok := env.Body.(*protocol.AssistantSentence)
	if !ok {
		return
	}
	s := sentence{env: env, body: b, id: sentenceID(b), received: time.Now()}
	st := sp.stops
	st.mu.Lock()
	defer st.mu.Unlock()
	if t := st.byID[b.PreviousID]; t != nil {
		t.deliver(s)
		return
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
}

// onStart ends the reading of the conversation's older turn here: the llm
// answers one message at a time, so it is done with that one.
func (sp *Speaker) onStart(m *nats.Msg) {
	p, err := subjects.Parse(m.Subject)
	if err != nil {
		return
	}
	env, err := protocol.Decode(m.Data)
	if err != nil {
		return
	}
	sa, ok := env.Body.(*protocol.StartAnswer)
	if !ok {
		return
	}
	st := sp.stops
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, t := range st.byID {
		if t.cid == p.ConversationID && t.id != sa.ID {
			t.end()
		}
	}
}

// onError ends the reading of a turn the llm gave up on.
func (sp *Speaker) onError(m *nats.Msg) {
	env, err := protocol.Decode(m.Data)
	if err != nil {
		return
	}
	e, ok := env.Body.(*protocol.ErrorMessage)
	if !ok || e.OriginatingID == nil {
		return
	}
	st := sp.stops
	st.mu.Lock()
	defer st.mu.Unlock()
	if t := st.byID[*e.OriginatingID]; t != nil {
		t.end()
	}
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
