package web_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/engines"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
	"github.com/alicia-voice/alicia/services/gateway"
	"github.com/alicia-voice/alicia/services/llm"
	"github.com/alicia-voice/alicia/services/memory"
	"github.com/alicia-voice/alicia/services/persistence/persistencetest"
)

// The stack's users: alice administers tools and MCP servers, bob does not;
// carol improves Alicia (optimize.spec.ts): her stored answers alone are
// what her runs learn from.
const (
	aliceKey = "alice-web-key-0123456789"
	bobKey   = "bob-web-key-0123456789ab"
	carolKey = "carol-web-key-0123456789"
)

// Model names the fakes list, so server-info finds each configured model served.
const (
	chatModel      = "fake-chat"
	embeddingModel = "fake-embedding"
	ttsModel       = "fake-tts"
	criticModel    = "fake-critic"
)

// stack is the text path in one process — embedded JetStream, a fresh
// Postgres database, persistence, memory, llm and a gateway that can be
// restarted on its port — with pkg/fakeopenai as the model servers.
type stack struct {
	base    string // http://127.0.0.1:port, the gateway (through its front door)
	gateway *restartable
	mcpURL  string // an MCP server (streamable HTTP) on 127.0.0.1
}

// stackOptions: voice adds the voice path with this transcriber (see
// voice_test.go); onVoiceToVoice gets the room-agent's figure of each turn.
type stackOptions struct {
	voice          fakeopenai.Transcriber
	onVoiceToVoice func(time.Duration)
	// judged: every answer is judged (the browser specs show the scores);
	// off, the benchmarks' stack does no more than a turn.
	judged bool
}

// judged judges every answer (ALICIA_JUDGE_SAMPLE=1).
func judged(o *stackOptions) { o.judged = true }

func startStack(t testing.TB, opts ...func(*stackOptions)) *stack {
	t.Helper()
	var o stackOptions
	for _, f := range opts {
		f(&o)
	}
	ns := natstest.Run(t)
	nc := natstest.Connect(t, ns)
	pgURL := pgtest.NewURL(t)
	persistencetest.Start(t, ns.ClientURL(), pgURL) // stopped after the services below
	log := testkit.Log()

	chat := httptest.NewServer(newModel())
	t.Cleanup(chat.Close)
	chatURL := chat.URL + "/v1"
	mem := fakeopenai.New(t, fakeopenai.WithModels(embeddingModel, "fake-extract"),
		fakeopenai.WithFallback(fakeopenai.Text(`{"memories": []}`)))
	mcp := startMCPServer(t)
	// The judge of every answer and the optimiser's judge and reflection
	// model (model_test.go's newCritic).
	critic := fakeopenai.New(t, fakeopenai.WithModels(criticModel), fakeopenai.WithResponder(newCritic()))

	mcfg := memory.DefaultConfig()
	mcfg.NATSURL, mcfg.PostgresURL = ns.ClientURL(), pgURL
	mcfg.EmbeddingURL, mcfg.EmbeddingModel = mem.URL(), embeddingModel
	mcfg.LLMURL, mcfg.LLMModel = mem.URL(), "fake-extract"
	testkit.Go(t, "memory", func(ctx context.Context) error {
		return memory.Run(ctx, mcfg, log.With().Str("service", "memory").Logger())
	})

	lcfg := llm.DefaultConfig()
	lcfg.Titles = false // its requests would take the fakes' answers and counts
	lcfg.NATSURL, lcfg.PostgresURL, lcfg.LLMURL, lcfg.Model = ns.ClientURL(), pgURL, chatURL, chatModel
	// One attempt: a scripted 503 is the answer's error at once.
	lcfg.Timeout, lcfg.Attempts, lcfg.RetryBackoff = 10*time.Second, 1, 10*time.Millisecond
	lcfg.Partitions, lcfg.ShutdownGrace, lcfg.MetricsAddr = 4, 0, ""
	lcfg.MemoryTimeout = 5 * time.Second
	lcfg.Tools.MCPAllowedHosts = []string{"127.0.0.1"}
	lcfg.Tools.MCPBackoffMax = time.Second
	lcfg.Judge.URL, lcfg.Judge.Model = critic.URL(), criticModel
	if o.judged {
		lcfg.Judge.Sample = 1
	}
	lcfg.Optimizer.URL, lcfg.Optimizer.Model = critic.URL(), criticModel
	testkit.Go(t, "llm", func(ctx context.Context) error {
		return llm.Run(ctx, lcfg, log.With().Str("service", "llm").Logger())
	})

	gcfg := gateway.DefaultConfig()
	gcfg.HTTPAddr, gcfg.NATSURL, gcfg.PostgresURL = "127.0.0.1:0", ns.ClientURL(), pgURL
	gcfg.APIKeys = "alice:" + aliceKey + ",bob:" + bobKey + ",carol:" + carolKey
	gcfg.AdminUsers = "alice"
	gcfg.RateLimit = 1000
	gcfg.Quotas.ConnectionsPerUser = 100
	gcfg.MCPAllowedHosts = []string{"127.0.0.1"}
	gcfg.LLM = engines.Engine{Kind: engines.OpenAI, URL: chatURL, Model: chatModel}
	gcfg.Embeddings = engines.Engine{Kind: engines.OpenAI, URL: mem.URL(), Model: embeddingModel}
	gcfg.TTS = engines.Engine{Kind: engines.OpenAI, URL: chatURL, Model: ttsModel, Voice: engines.DefaultVoice(engines.OpenAI)}
	// Nothing listens on the discard port: settings show a backend that does not answer.
	gcfg.ASR = engines.Engine{Kind: engines.OpenAI, URL: "http://127.0.0.1:9/v1", Model: engines.DefaultASRModel}
	if o.voice != nil {
		startVoice(t, o, ns.ClientURL(), &gcfg)
	}
	gw := &restartable{t: t, cfg: gcfg, log: log.With().Str("service", "gateway").Logger()}
	addr, err := gw.start()
	if err != nil {
		t.Fatal(err)
	}
	front := startFrontDoor(t, addr)
	gw.front = front

	// Ready: memory answers and the llm has its turn consumers.
	js := natstest.JetStream(t, nc)
	testkit.EventuallyNoError(t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := rpc.MemorySearch(ctx, nc, rpc.MemorySearchRequest{UserID: "nobody", Query: "ready?"}); err != nil {
			return err
		}
		_, err := js.Consumer(ctx, "LLM_TURNS", fmt.Sprintf("llm-p%d", lcfg.Partitions-1))
		return err
	}, "stack ready")
	return &stack{base: "http://" + front.addr(), gateway: gw, mcpURL: mcp}
}

// restartable runs the gateway and can stop and start it again on the same
// address, as a deployment restarting it would: its WebSockets drop and the
// clients reconnect.
type restartable struct {
	t     testing.TB
	cfg   gateway.Config
	log   zerolog.Logger
	front *frontDoor

	mu   sync.Mutex
	svc  *testkit.Service
	addr string
}

// start runs the gateway and returns its address once it listens.
func (g *restartable) start() (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.startLocked()
}

func (g *restartable) startLocked() (string, error) {
	cfg := g.cfg
	if g.addr != "" {
		cfg.HTTPAddr = g.addr
	}
	ready := make(chan string, 1)
	svc := testkit.Go(g.t, "gateway", func(ctx context.Context) error {
		return gateway.Run(ctx, cfg, g.log, func(a string) { ready <- a })
	})
	select {
	case a := <-ready:
		g.svc, g.addr = svc, a
		return a, nil
	case <-svc.Exited():
		return "", fmt.Errorf("gateway: %w", svc.Err())
	case <-time.After(30 * time.Second):
		return "", errors.New("gateway did not start within 30s")
	}
}

// restart stops the gateway, drops every connection to it as the end of
// its process would, and starts it again on the same address.
func (g *restartable) restart() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	stopped := make(chan struct{})
	go func() { g.svc.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		return errors.New("gateway did not stop within 20s")
	}
	// http.Server.Shutdown leaves hijacked connections (WebSockets) open; a
	// process that ends closes them, so the front door does.
	g.front.dropAll()
	_, err := g.startLocked()
	return err
}

// frontDoor is the address the browser uses: it forwards each TCP
// connection to the gateway, and can drop them all at once (a restart).
type frontDoor struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func startFrontDoor(t testing.TB, target string) *frontDoor {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &frontDoor{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.forward(c)
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		f.dropAll()
	})
	return f
}

func (f *frontDoor) addr() string { return f.ln.Addr().String() }

func (f *frontDoor) forward(c net.Conn) {
	up, err := net.Dial("tcp", f.target)
	if err != nil {
		_ = c.Close()
		return
	}
	f.mu.Lock()
	f.conns[c], f.conns[up] = struct{}{}, struct{}{}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.conns, c)
		delete(f.conns, up)
		f.mu.Unlock()
		_ = c.Close()
		_ = up.Close()
	}()
	copied := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); copied <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); copied <- struct{}{} }()
	<-copied
}

// dropAll closes every connection going through.
func (f *frontDoor) dropAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.conns {
		_ = c.Close()
	}
}
