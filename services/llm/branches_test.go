package llm_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
)

// The replica that answered a conversation remembers its branch: the next
// turn is built without history.get (no wait for persistence) while nothing
// else was published to the conversation; once something was, it reads
// history.get again. Either way the model gets the same, complete context.
func TestNextTurnUsesTheRememberedBranch(t *testing.T) {
	h := newHarness(t)
	h.replica(h.config(h.fake))
	var asked atomic.Int64
	sub, err := h.nc.Subscribe(rpc.HistorySubject, func(*nats.Msg) { asked.Add(1) }) // sees every request
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	cid := h.conversation()
	w := h.watch(cid)
	var want []string
	turn := func(q, a string) {
		t.Helper()
		h.fake.Enqueue(fakeopenai.Text(a))
		uid := h.say(cid, q)
		w.answered(t, uid)
		req := h.fake.Requests()[len(h.fake.Requests())-1]
		var sent []string
		for _, m := range req.Messages[1:] {
			sent = append(sent, m.Role+":"+m.Content)
		}
		want = append(want, "user:"+q)
		if strings.Join(sent, "\n") != strings.Join(want, "\n") {
			t.Fatalf("context sent:\n%s\nwant:\n%s", strings.Join(sent, "\n"), strings.Join(want, "\n"))
		}
		want = append(want, "assistant:"+a)
	}
	turn("First question?", "First answer.")
	before := asked.Load()
	turn("Second question?", "Second answer.")
	turn("Third question?", "Third answer.")
	if n := asked.Load() - before; n != 0 {
		t.Fatalf("history.get asked %d times for turns the replica remembers", n)
	}
	// The user's speech transcribed (partial and final) changes no branch:
	// still remembered.
	for _, final := range []bool{false, true} {
		if _, err := h.pub.PublishServer(context.Background(), protocol.New(cid, &protocol.Transcription{ID: "am_spoken", ConversationID: cid,
			Text: "Fourth", Final: final}), ""); err != nil {
			t.Fatal(err)
		}
	}
	before = asked.Load()
	turn("Fourth question?", "Fourth answer.")
	if n := asked.Load() - before; n != 0 {
		t.Fatalf("history.get asked %d times after a transcription", n)
	}
	// Something else on the conversation (a title change): history.get again.
	title := "Renamed"
	if _, err := h.pub.PublishServer(context.Background(), protocol.New(cid, &protocol.ConversationUpdate{ConversationID: cid,
		Title: &title, UpdatedAt: time.Now().UnixMilli()}), ""); err != nil {
		t.Fatal(err)
	}
	before = asked.Load()
	turn("Fifth question?", "Fifth answer.")
	if asked.Load() == before {
		t.Fatal("history.get was not asked after another server envelope")
	}
}
