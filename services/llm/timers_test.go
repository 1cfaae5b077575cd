package llm_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/llm"
	"github.com/alicia-voice/alicia/services/llm/internal/metrics"
	"github.com/alicia-voice/alicia/services/llm/internal/timers"
)

// timerConfig is a replica with the real tool registry (the timer tools).
func (h *harness) timerConfig() llm.Config {
	cfg := h.config(h.fake)
	cfg.Toolbox = nil
	return cfg
}

// setZone stores the person's time zone (UserSettings) and waits for the row.
func (h *harness) setZone(t *testing.T, zone string) {
	t.Helper()
	env := protocol.New("", &protocol.UserSettings{UserID: testUser, TimeZone: &zone, Timestamp: time.Now().UnixMilli()})
	env.Meta = map[string]any{edge.MetaUserID: testUser}
	if _, err := h.pub.PublishSystem(context.Background(), env, ""); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		var z *string
		_ = h.pool.QueryRow(context.Background(), `SELECT time_zone FROM alicia_user_settings WHERE user_id = $1`, testUser).Scan(&z)
		return z != nil && *z == zone
	}, "user settings row")
}

// toolTurn has the model call one tool for the next message and answer "Done.".
func (h *harness) toolTurn(name, args string) {
	h.fake.Reset()
	h.fake.On(fakeopenai.HasToolResult(), fakeopenai.Text("Done."))
	h.fake.On(fakeopenai.HasTools(), fakeopenai.Calls(fakeopenai.ToolCall{Name: name, Arguments: args}))
}

// toolResult is the result of the tool call the answer to uid made.
func toolResult(t *testing.T, w *watcher, uid string) *protocol.ToolUseResult {
	t.Helper()
	sa, _, envs := w.answered(t, uid)
	for _, q := range bodies[*protocol.ToolUseRequest](envs) {
		if q.MessageID != sa.ID {
			continue
		}
		for _, r := range bodies[*protocol.ToolUseResult](envs) {
			if r.RequestID == q.ID {
				return r
			}
		}
	}
	t.Fatalf("no tool result in the answer to %s", uid)
	return nil
}

// timerRow is a timer's stored state.
type timerRow struct {
	status, kind, label, zone string
	delivered, message        *string
	due                       time.Time
}

func (h *harness) timerRow(t *testing.T, id string, cond func(timerRow) bool) timerRow {
	t.Helper()
	var r timerRow
	testkit.Eventually(t, 15*time.Second, func() bool {
		err := h.pool.QueryRow(context.Background(), `SELECT status, kind, label, time_zone, delivered_as, message_id, due_at FROM alicia_timers WHERE id = $1`, id).
			Scan(&r.status, &r.kind, &r.label, &r.zone, &r.delivered, &r.message, &r.due)
		return err == nil && cond(r)
	}, "timer row %s", id)
	return r
}

// delivery waits for the timer's message in the conversation.
func (w *watcher) delivery(t *testing.T, id string) (*protocol.StartAnswer, *protocol.AssistantSentence, []seen) {
	t.Helper()
	mid := timers.MessageID(id)
	envs := w.until(t, 20*time.Second, "timer message "+id, func(envs []seen) bool { return finished(envs, mid) })
	var sa *protocol.StartAnswer
	for _, s := range envs {
		if b, ok := s.Env.Body.(*protocol.StartAnswer); ok && b.ID == mid {
			sa = b
			if s.Env.Meta[timers.MetaTimerID] != id {
				t.Fatalf("StartAnswer meta %v, want %s %s", s.Env.Meta, timers.MetaTimerID, id)
			}
		}
	}
	sents := sentencesOf(envs, mid)
	if sa == nil || len(sents) != 1 {
		t.Fatalf("timer message: start %+v, %d sentences", sa, len(sents))
	}
	return sa, sents[0], envs
}

func delivered(as string) float64 {
	return testutil.ToFloat64(metrics.Default().TimersDelivered.WithLabelValues(as))
}

// Timers end to end: set by the model's tool in the person's zone, stored,
// delivered as one assistant message when due; after every llm replica
// stopped before it was due, it fires once when they are back; with two
// replicas it is delivered once; spoken when a room-agent reports a call
// open; cancelled by the tool, never delivered.
func TestTimers(t *testing.T) {
	h := newHarness(t)
	h.setZone(t, "Europe/Paris")
	stop := h.replica(h.timerConfig())
	cid := h.conversation()
	w := h.watch(cid)

	t.Run("set and delivered as a message", func(t *testing.T) {
		h.toolTurn(timers.SetTimerName, `{"duration":"PT2S","label":"tea"}`)
		before := delivered("message")
		res := toolResult(t, w, h.say(cid, "set a timer for two seconds for the tea"))
		m, ok := res.Result.(map[string]any)
		if !res.Success || !ok || !strings.Contains(fmt.Sprint(m["due"]), "(Europe/Paris)") || m["label"] != "tea" {
			t.Fatalf("set_timer result %+v", res)
		}
		// The model was told the local time in the person's zone.
		if sys := h.fake.Requests()[0].Messages[0].Content; !strings.Contains(sys, "in the user's time zone, Europe/Paris (UTC+01:00)") {
			t.Fatalf("system prompt without the local time: %q", sys)
		}
		id := m["id"].(string)
		r := h.timerRow(t, id, func(r timerRow) bool { return true })
		if r.kind != "timer" || r.label != "tea" || r.zone != "Europe/Paris" {
			t.Fatalf("stored %+v", r)
		}
		sa, sent, _ := w.delivery(t, id)
		if sa.AnswerType == nil || *sa.AnswerType != protocol.StartAnswerAnswerTypeText || sent.Text != "Your 2-second timer for tea is done." {
			t.Fatalf("delivered %+v %q", sa, sent.Text)
		}
		r = h.timerRow(t, id, func(r timerRow) bool { return r.status == "fired" })
		if *r.delivered != "message" || *r.message != sa.ID {
			t.Fatalf("fired row %+v", r)
		}
		h.row(t, sa.ID, func(r row) bool { return r.role == "assistant" && r.status == "completed" && r.contents == sent.Text })
		if got := delivered("message") - before; got != 1 {
			t.Fatalf("%v deliveries counted, want 1", got)
		}
	})

	t.Run("due while every replica was down, then two replicas", func(t *testing.T) {
		h.toolTurn(timers.SetTimerName, `{"duration":"3s","label":"eggs"}`)
		res := toolResult(t, w, h.say(cid, "three seconds for the eggs"))
		id := res.Result.(map[string]any)["id"].(string)
		r := h.timerRow(t, id, func(r timerRow) bool { return r.status == "scheduled" })
		stop()
		testkit.Eventually(t, 10*time.Second, func() bool { return time.Now().After(r.due.Add(500 * time.Millisecond)) }, "the due time to pass")
		if envs := w.all(); finished(envs, timers.MessageID(id)) {
			t.Fatal("delivered with no llm running")
		}
		before := delivered("message")
		stop = h.replica(h.timerConfig())
		h.replica(h.timerConfig())
		w.delivery(t, id)
		r = h.timerRow(t, id, func(r timerRow) bool { return r.status == "fired" })
		late := time.Since(r.due)
		t.Logf("fired %s after its due time (replicas down for it)", late.Round(time.Millisecond))
		// Once over both replicas: counted once, one StartAnswer stored.
		testkit.Eventually(t, 5*time.Second, func() bool { return delivered("message")-before >= 1 }, "delivery counted")
		if got := delivered("message") - before; got != 1 {
			t.Fatalf("%v deliveries over two replicas, want 1", got)
		}
		n := 0
		for _, sa := range bodies[*protocol.StartAnswer](w.all()) {
			if sa.ID == timers.MessageID(id) {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%d StartAnswers for the timer", n)
		}
	})

	t.Run("two replicas running deliver once", func(t *testing.T) {
		h.toolTurn(timers.SetTimerName, `{"duration":"2s"}`)
		before := delivered("message")
		res := toolResult(t, w, h.say(cid, "a two second timer"))
		id := res.Result.(map[string]any)["id"].(string)
		_, sent, _ := w.delivery(t, id)
		if sent.Text != "Your 2-second timer is done." {
			t.Fatalf("text %q", sent.Text)
		}
		h.timerRow(t, id, func(r timerRow) bool { return r.status == "fired" })
		if got := delivered("message") - before; got != 1 {
			t.Fatalf("%v deliveries, want 1", got)
		}
	})

	t.Run("spoken when a call is open", func(t *testing.T) {
		// The room-agent in the conversation's room says a person is in the call.
		unserve, err := rpc.ServeVoiceRoom(h.nc, cid, func() int { return 1 })
		if err != nil {
			t.Fatal(err)
		}
		defer unserve()
		h.toolTurn(timers.SetReminderName, `{"when":"in 2 seconds","label":"call Anna"}`)
		res := toolResult(t, w, h.say(cid, "remind me in two seconds to call Anna"))
		id := res.Result.(map[string]any)["id"].(string)
		sa, sent, _ := w.delivery(t, id)
		if sa.AnswerType == nil || *sa.AnswerType != protocol.StartAnswerAnswerTypeTextVoice || sent.Text != "Reminder: call Anna." {
			t.Fatalf("delivered %+v %q", sa, sent.Text)
		}
		r := h.timerRow(t, id, func(r timerRow) bool { return r.status == "fired" })
		if r.kind != "reminder" || *r.delivered != "spoken" {
			t.Fatalf("fired row %+v", r)
		}
	})

	t.Run("cancelled by label, listed, invalid times refused", func(t *testing.T) {
		h.toolTurn(timers.SetReminderName, `{"when":"in 1 hour","label":"water the plants"}`)
		res := toolResult(t, w, h.say(cid, "remind me in an hour to water the plants"))
		id := res.Result.(map[string]any)["id"].(string)
		h.timerRow(t, id, func(r timerRow) bool { return r.status == "scheduled" })

		h.toolTurn(timers.ListTimersName, `{}`)
		res = toolResult(t, w, h.say(cid, "what timers do I have?"))
		if !res.Success || !strings.Contains(fmt.Sprint(res.Result), id) {
			t.Fatalf("list_timers %+v", res.Result)
		}

		h.toolTurn(timers.CancelTimerName, `{"label":"plants"}`)
		res = toolResult(t, w, h.say(cid, "cancel the plants reminder"))
		if !res.Success {
			t.Fatalf("cancel_timer %+v", res)
		}
		h.timerRow(t, id, func(r timerRow) bool { return r.status == "cancelled" })

		h.toolTurn(timers.ListTimersName, `{}`)
		res = toolResult(t, w, h.say(cid, "and now?"))
		if strings.Contains(fmt.Sprint(res.Result), id) {
			t.Fatalf("a cancelled reminder listed: %+v", res.Result)
		}

		for _, c := range []struct{ name, tool, args string }{
			{"past", timers.SetReminderName, `{"when":"2020-01-01T10:00","label":"old"}`},
			{"too far", timers.SetTimerName, `{"duration":"P400D"}`},
			{"unreadable", timers.SetTimerName, `{"duration":"a while"}`},
		} {
			h.toolTurn(c.tool, c.args)
			res = toolResult(t, w, h.say(cid, c.name))
			if res.Success || res.ErrorCode == nil || *res.ErrorCode != protocol.ToolUseResultErrorCodeInvalidParameters {
				t.Fatalf("%s: %+v", c.name, res)
			}
		}
	})
}

// A replica that claimed a due timer and died before delivering it leaves
// its claim in TIMER_CLAIMS: another replica delivers the timer once the
// claim is older than ALICIA_LLM_TIMERS_CLAIM_TIMEOUT, not before, and once.
func TestTimerClaimTakenOver(t *testing.T) {
	h := newHarness(t)
	cfg := h.timerConfig()
	cfg.Timers.ClaimTimeout = 2 * time.Second
	h.replica(cfg)
	cid := h.conversation()
	w := h.watch(cid)
	testkit.Eventually(t, 10*time.Second, func() bool {
		var n int
		_ = h.pool.QueryRow(context.Background(), `SELECT count(*) FROM alicia_conversations WHERE id = $1`, cid).Scan(&n)
		return n == 1
	}, "conversation stored")
	kv, err := h.js.KeyValue(context.Background(), timers.ClaimBucket)
	if err != nil {
		t.Fatal(err)
	}
	id := protocol.NewID("atm")
	if _, err := kv.Create(context.Background(), id, []byte("a replica that died")); err != nil {
		t.Fatal(err)
	}
	dead, err := kv.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	claimed := dead.Created() // the server's time of the claim, which the replica reads
	now := time.Now()
	tm := &protocol.Timer{ID: id, UserID: testUser, ConversationID: cid, Kind: protocol.TimerKindTimer, DueAt: now.Add(200 * time.Millisecond).UnixMilli(),
		Status: protocol.TimerStatusScheduled, CreatedAt: now.UnixMilli(), Timestamp: now.UnixMilli()}
	if _, err := h.pub.PublishSystem(context.Background(), protocol.New("", tm), ""); err != nil {
		t.Fatal(err)
	}
	_, _, envs := w.delivery(t, id)
	var at time.Time
	n := 0
	for _, s := range envs {
		if sa, ok := s.Env.Body.(*protocol.StartAnswer); ok && sa.ID == timers.MessageID(id) {
			at, n = s.At, n+1
		}
	}
	if n != 1 {
		t.Fatalf("%d StartAnswers for the timer", n)
	}
	if at.Before(claimed.Add(cfg.Timers.ClaimTimeout)) {
		t.Fatalf("delivered %s after the other replica's claim, within its %s", at.Sub(claimed), cfg.Timers.ClaimTimeout)
	}
	h.timerRow(t, id, func(r timerRow) bool { return r.status == "fired" })
	e, err := kv.Get(context.Background(), id)
	if err != nil || string(e.Value()) == "a replica that died" {
		t.Fatalf("claim after the takeover: %v %v", e, err)
	}
}
