package text_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
	"github.com/alicia-voice/alicia/services/gateway"
	"github.com/alicia-voice/alicia/services/llm"
	"github.com/alicia-voice/alicia/services/memory"
	"github.com/alicia-voice/alicia/services/persistence"
)

// everything is the text stack's services against one NATS server and one
// database, each stoppable: stop stops them all, the last started first.
func everything(t *testing.T, natsURL, pgURL string, chat, mem *fakeopenai.Server) (s *stack, stop func()) {
	t.Helper()
	log := zerolog.Nop()
	var svcs []*testkit.Service
	pcfg := persistence.DefaultConfig()
	pcfg.NATSURL, pcfg.PostgresURL = natsURL, pgURL
	svcs = append(svcs, testkit.Go(t, "persistence", func(ctx context.Context) error { return persistence.Run(ctx, pcfg, log) }))
	mcfg := memory.DefaultConfig()
	mcfg.NATSURL, mcfg.PostgresURL = natsURL, pgURL
	mcfg.EmbeddingURL, mcfg.EmbeddingModel, mcfg.LLMURL, mcfg.LLMModel = mem.URL(), "fake-embed", mem.URL(), "fake-extract"
	svcs = append(svcs, testkit.Go(t, "memory", func(ctx context.Context) error { return memory.Run(ctx, mcfg, log) }))
	lcfg := llm.DefaultConfig()
	lcfg.Titles = false
	lcfg.NATSURL, lcfg.PostgresURL, lcfg.LLMURL, lcfg.Model = natsURL, pgURL, chat.URL(), "fake-chat"
	lcfg.Partitions, lcfg.ShutdownGrace, lcfg.MetricsAddr = 8, 0, ""
	svcs = append(svcs, testkit.Go(t, "llm", func(ctx context.Context) error { return llm.Run(ctx, lcfg, log) }))
	gcfg := gateway.DefaultConfig()
	gcfg.HTTPAddr, gcfg.NATSURL, gcfg.PostgresURL = "127.0.0.1:0", natsURL, pgURL
	gcfg.APIKeys = "alice:" + aliceKey
	addr := make(chan string, 1)
	svcs = append(svcs, testkit.Go(t, "gateway", func(ctx context.Context) error {
		return gateway.Run(ctx, gcfg, log, func(a string) { addr <- a })
	}))
	var a string
	select {
	case a = <-addr:
	case <-time.After(30 * time.Second):
		t.Fatal("gateway did not start")
	}
	return &stack{t: t, base: "http://" + a, ws: "ws://" + a + "/v1/ws", chat: chat, mem: mem}, func() {
		for i := len(svcs) - 1; i >= 0; i-- {
			svcs[i].Stop()
		}
	}
}

// TestTimerFiresAfterEverythingRestarted: a timer set by the model's tool
// call is delivered once, as a message in its conversation, after every
// service and the NATS server were stopped before it was due and started
// again (JetStream's store and Postgres kept).
func TestTimerFiresAfterEverythingRestarted(t *testing.T) {
	dir := t.TempDir()
	ns := natstest.RunWithDir(t, dir)
	pgURL := pgtest.NewURL(t)
	chat := fakeopenai.New(t, fakeopenai.WithFallback(fakeopenai.Text("I have nothing scripted for that.")))
	mem := fakeopenai.New(t, fakeopenai.WithFallback(fakeopenai.Text(`{"memories": []}`)))
	chat.On(fakeopenai.HasToolResult(), fakeopenai.Text("Your tea timer is set."))
	chat.On(fakeopenai.All(fakeopenai.LastUserContains("tea"), fakeopenai.HasTools()),
		fakeopenai.Calls(fakeopenai.ToolCall{Name: "set_timer", Arguments: `{"duration":"12s","label":"tea"}`}))
	s, stop := everything(t, ns.ClientURL(), pgURL, chat, mem)
	pool := openPool(t, pgURL)

	c := s.open(t, aliceKey, "", 0)
	_, sentences, _ := c.answer(c.say("Set a timer for twelve seconds for the tea"))
	if textOf(sentences) != "Your tea timer is set." {
		t.Fatalf("answer %q", textOf(sentences))
	}
	var id string
	var due time.Time
	testkit.EventuallyNoError(t, 15*time.Second, func() error {
		return pool.QueryRow(context.Background(), `SELECT id, due_at FROM alicia_timers WHERE conversation_id = $1 AND status = 'scheduled'`, c.cid).Scan(&id, &due)
	}, "the timer stored as scheduled")
	lastSeen := c.lastIn

	// Everything down before it is due; the NATS server too.
	c.c.CloseNow()
	stop()
	ns.Shutdown()
	ns.WaitForShutdown()
	if left := time.Until(due); left < time.Second {
		t.Fatalf("the restart began %s before the due time: lengthen the timer", left)
	}
	ns = natstest.RunWithDir(t, dir)
	s, _ = everything(t, ns.ClientURL(), pgURL, chat, mem)
	nc := natstest.Connect(t, ns)
	testkit.EventuallyNoError(t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return rpc.WaitApplied(ctx, nc, bus.StreamSystem, 0)
	}, "persistence back")

	// The person comes back to the conversation: the reminder arrives.
	c = s.open(t, aliceKey, c.cid, lastSeen)
	start := c.until(func(e protocol.Envelope) bool {
		sa, ok := e.Body.(*protocol.StartAnswer)
		return ok && e.Meta["alicia.timer_id"] == id && sa.ID != ""
	})
	got := c.until(func(e protocol.Envelope) bool {
		b, ok := e.Body.(*protocol.AssistantSentence)
		return ok && b.PreviousID == start.Body.(*protocol.StartAnswer).ID && isFinal(e)
	}).Body.(*protocol.AssistantSentence)
	t.Logf("delivered %s after its due time, across a restart of NATS and every service", time.Since(due).Round(time.Millisecond))
	if got.Text == "" {
		t.Fatal("the timer's message has no text")
	}
	var status, msgID string
	testkit.EventuallyNoError(t, 15*time.Second, func() error {
		err := pool.QueryRow(context.Background(), `SELECT status, COALESCE(message_id, '') FROM alicia_timers WHERE id = $1 AND status = 'fired'`, id).Scan(&status, &msgID)
		return err
	}, "the timer stored as fired")
	// Its message is stored once, completed, with the text delivered.
	var contents string
	testkit.EventuallyNoError(t, 15*time.Second, func() error {
		return pool.QueryRow(context.Background(), `SELECT contents FROM alicia_messages WHERE conversation_id = $1 AND id = $2
			AND message_role = 'assistant' AND completion_status = 'completed'`, c.cid, msgID).Scan(&contents)
	}, "the timer's message stored")
	if contents != got.Text {
		t.Fatalf("stored %q, delivered %q", contents, got.Text)
	}
}

func openPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
