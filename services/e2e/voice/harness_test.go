// Package voice_test holds the voice end-to-end tests: a real
// livekit-server, embedded JetStream, Postgres and the real persistence,
// llm, asr, tts and room-agent services in one network namespace, with fake
// OpenAI-compatible model servers (chat, transcription, speech) and a Go
// LiveKit client in the role of the user.
package voice_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/devtools"
	"github.com/alicia-voice/alicia/pkg/engines"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/livekitserver"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/pkg/testkit/netns"
	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
	"github.com/alicia-voice/alicia/services/asr"
	"github.com/alicia-voice/alicia/services/gateway"
	"github.com/alicia-voice/alicia/services/llm"
	"github.com/alicia-voice/alicia/services/persistence"
	"github.com/alicia-voice/alicia/services/persistence/persistencetest"
	roomagent "github.com/alicia-voice/alicia/services/room-agent"
	"github.com/alicia-voice/alicia/services/tts"
)

func TestMain(m *testing.M) { netns.Main(m) }

type stack struct {
	t      testing.TB
	lk     *livekitserver.Server
	nc     *nats.Conn
	js     jetstream.JetStream
	pool   *pgxpool.Pool
	chat   *fakeopenai.Server // llm
	speech *fakeopenai.Server // asr transcriptions and tts speech
	pub    *bus.Publisher
	base   string // the gateway, http://127.0.0.1:port

	natsURL string // comma-separated with a cluster
	cluster []*server.Server
}

const aliceKey = "alice-voice-key-0123456789"

type options struct {
	answer  string // what the fake LLM says (default: three sentences about the weather)
	noAgent bool   // the test runs its own room-agents
	agent   func(*roomagent.Config)
	tts     func(*tts.Config)
	// profile times the fake models (zero: instant).
	profile fakeopenai.Profile
	// gateway adjusts the gateway's configuration.
	gateway func(*gateway.Config)
	// respond, when set, makes the fake LLM's answer from the request
	// (instead of answer).
	respond func(fakeopenai.Request) fakeopenai.Turn
	// cluster runs the services on three JetStream servers routed on
	// 127.0.0.1, every stream at R3 (stack.cluster), instead of one.
	cluster bool
	// llm adjusts the llm service's configuration (e.g. its judge, which
	// is off unless set: Judge.Sample 0).
	llm func(*llm.Config)
}

func newStack(t testing.TB, o options) *stack {
	t.Helper()
	netns.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // bounds starting only
	defer cancel()
	lk, err := livekitserver.Start(ctx, livekitserver.Options{Bin: devtools.Need(t, devtools.LiveKit), IP: netns.IP()})
	if err != nil {
		t.Fatalf("livekit-server: %v", err)
	}
	t.Cleanup(func() { _ = lk.Stop() })

	var natsURL string
	var nc *nats.Conn
	var js jetstream.JetStream
	var servers []*server.Server
	// Every service ensures or creates the streams with its own settings:
	// each gets streams.
	streams := bus.DefaultStreams()
	if o.cluster {
		streams.Replicas, streams.ConversationsMaxBytes = 3, 64<<20
		servers = natstest.RunCluster(t, 3, "voice")
		var urls []string
		for _, s := range servers {
			urls = append(urls, s.ClientURL())
		}
		natsURL = strings.Join(urls, ",")
		nc, err = nats.Connect(natsURL, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		if js, err = jetstream.New(nc); err != nil {
			t.Fatal(err)
		}
	} else {
		ns := natstest.Run(t)
		natsURL = ns.ClientURL()
		nc = natstest.Connect(t, ns)
		js = natstest.JetStream(t, nc)
	}
	pgURL := pgtest.NewURL(t)
	pool, err := pgxpool.New(context.Background(), pgURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	answer := o.answer
	if answer == "" {
		answer = "It will be sunny in Paris tomorrow. Expect a high of twenty degrees. Enjoy your day!"
	}
	reply := fakeopenai.WithFallback(fakeopenai.Text(answer))
	if o.respond != nil {
		reply = fakeopenai.WithResponder(o.respond)
	}
	chat := fakeopenai.New(t, reply, fakeopenai.WithProfile(o.profile))
	speech := fakeopenai.New(t, fakeopenai.WithProfile(o.profile))
	log := testkit.Log()
	persistencetest.Start(t, natsURL, pgURL, func(c *persistence.Config) { c.Streams = streams })

	// Each service runs until the test ends; the ones started last stop first.
	run := func(name string, f func(context.Context) error) { testkit.Go(t, name, f) }

	lcfg := llm.DefaultConfig()
	lcfg.Titles = false // its requests would take the fakes' scripted answers
	lcfg.NATSURL, lcfg.PostgresURL, lcfg.LLMURL, lcfg.Model = natsURL, pgURL, chat.URL(), "fake-chat"
	lcfg.Partitions, lcfg.ShutdownGrace, lcfg.MemoryTopK, lcfg.MetricsAddr = 4, 0, 0, ""
	lcfg.Streams = streams
	if o.llm != nil {
		o.llm(&lcfg)
	}
	run("llm", func(ctx context.Context) error { return llm.Run(ctx, lcfg, log.With().Str("service", "llm").Logger()) })

	acfg := asr.DefaultConfig()
	acfg.NATSURL, acfg.URL, acfg.Model, acfg.Streams = natsURL, speech.URL(), "fake-whisper", streams
	acfg.PostgresURL = pgURL // each conversation's language (pkg/prefs)
	run("asr", func(ctx context.Context) error { return asr.Run(ctx, acfg, log.With().Str("service", "asr").Logger()) })

	tcfg := tts.DefaultConfig()
	tcfg.NATSURL, tcfg.Engine, tcfg.URL, tcfg.Model = natsURL, "openai", speech.URL(), "fake-kokoro"
	tcfg.PostgresURL = pgURL // each conversation's voice and speed (pkg/prefs)
	tcfg.Streams = streams
	if o.tts != nil {
		o.tts(&tcfg)
	}
	run("tts", func(ctx context.Context) error { return tts.Run(ctx, tcfg, log.With().Str("service", "tts").Logger()) })

	rcfg := roomagent.DefaultConfig()
	rcfg.NATSURL, rcfg.LiveKitURL, rcfg.LiveKitAPIKey, rcfg.LiveKitAPISecret = natsURL, lk.URL, lk.APIKey, lk.APISecret
	rcfg.Lease, rcfg.EmptyTimeout = 3*time.Second, 5*time.Second
	rcfg.PostgresURL = pgURL // hands-free mode (pkg/prefs)
	rcfg.Streams = streams
	// The neural VAD listens (a missing runtime fails the start).
	rcfg.VAD = roomagent.VADNeural
	if o.agent != nil {
		o.agent(&rcfg)
	}
	if !o.noAgent {
		run("room-agent", func(ctx context.Context) error {
			return roomagent.Run(ctx, rcfg, log.With().Str("service", "room-agent").Logger())
		})
	}
	gcfg := gateway.DefaultConfig()
	gcfg.HTTPAddr, gcfg.NATSURL, gcfg.PostgresURL = "127.0.0.1:0", natsURL, pgURL
	gcfg.APIKeys, gcfg.RateLimit = "alice:"+aliceKey, 1000
	gcfg.Streams = streams
	gcfg.LiveKit = gateway.LiveKit{URL: lk.URL, APIKey: lk.APIKey, APISecret: lk.APISecret, TokenTTL: time.Hour}
	// The speech engine the stack runs: server-info lists its voices, and
	// the settings routes take only those.
	gcfg.TTS = engines.Engine{Kind: engines.OpenAI, URL: speech.URL(), Model: tcfg.Model, Voice: engines.DefaultVoice(engines.OpenAI)}
	gcfg.ASR = engines.Engine{Kind: engines.OpenAI, URL: speech.URL(), Model: acfg.Model}
	if o.gateway != nil {
		o.gateway(&gcfg)
	}
	addr := make(chan string, 1)
	run("gateway", func(ctx context.Context) error {
		return gateway.Run(ctx, gcfg, log.With().Str("service", "gateway").Logger(), func(a string) { addr <- a })
	})
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-time.After(30 * time.Second):
		t.Fatal("gateway did not start")
	}
	return &stack{t: t, lk: lk, nc: nc, js: js, pool: pool, chat: chat, speech: speech, pub: bus.NewPublisher(js), base: base,
		natsURL: natsURL, cluster: servers}
}

// api calls the gateway as alice and decodes the JSON answer into out.
func (s *stack) api(method, path string, out any) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.base+path, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+aliceKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		s.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		s.t.Fatal(err)
	}
}

// conversation creates a conversation for alice through the gateway.
func (s *stack) conversation() string {
	s.t.Helper()
	var c struct {
		ID string `json:"id"`
	}
	s.api(http.MethodPost, "/v1/conversations", &c)
	return c.ID
}

// token asks the gateway for alice's room token, which also dispatches an agent.
func (s *stack) token(cid string) string {
	s.t.Helper()
	var tok struct {
		URL, Token, Room, Identity string
	}
	s.api(http.MethodPost, "/v1/conversations/"+cid+"/token", &tok)
	if tok.Room != "conv_"+cid || tok.URL == "" {
		s.t.Fatalf("token answer %+v", tok)
	}
	return tok.Token
}
