package agent

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
)

// TestRoutesCountAndLogMalformedAudio: a SpeechAudio that does not decode
// is counted under the room-agent's speech_audio route and logged with its
// subject, and the next, good, chunk is still queued for playout.
func TestRoutesCountAndLogMalformedAudio(t *testing.T) {
	nc := natstest.Connect(t, natstest.Run(t))
	var logs testkit.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &Room{cfg: Config{}.WithDefaults(), d: Deps{NC: nc, Log: zerolog.Nop(), Metrics: DefaultMetrics()}, cid: protocol.NewID("ac"),
		log: zerolog.New(&logs), ctx: ctx, cancel: cancel}
	r.turns = newTracker(r, newTurnMetrics(r.d.Metrics, nil))
	p, err := NewPlayer(r.turns.onPlay)
	if err != nil {
		t.Fatal(err)
	}
	r.player = p // not run: what it is given stays queued
	subs, err := r.routes().Subscribe(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	defer subs.Close()

	subject := subjects.AudioOut(r.cid)
	natstest.Dropped(t, nc, &logs, "room-agent", "speech_audio", bus.DropEnvelope, subject, []byte("\xc1 not an envelope"))
	if p.Busy() {
		t.Fatal("the player has audio after a malformed chunk")
	}

	sa := chunk("am_1", 1, 0, false, false)
	sa.ConversationID = r.cid
	b, err := protocol.Encode(protocol.New(r.cid, sa))
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish(subject, b); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, p.Busy, "the good chunk after the malformed one queued for playout")
}
