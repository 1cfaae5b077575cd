// Package upcmd implements `alicia up`: the local stack in the foreground.
package upcmd

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for goose
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/alicia-voice/alicia/migrations"
	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/lan"
	"github.com/alicia-voice/alicia/pkg/localpg"
	"github.com/alicia-voice/alicia/pkg/natsauth"
	"github.com/alicia-voice/alicia/pkg/natsserver"
	"github.com/alicia-voice/alicia/pkg/pgread"
	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/services/cli/internal/opnats"
	"github.com/alicia-voice/alicia/services/gateway"
	"github.com/alicia-voice/alicia/services/llm"
	"github.com/alicia-voice/alicia/services/memory"
	"github.com/alicia-voice/alicia/services/persistence"
	"github.com/alicia-voice/alicia/services/tts"
)

// Config of the local stack, from ALICIA_* env vars.
type Config struct {
	NATSURL  string // ALICIA_NATS_URL, default nats://127.0.0.1:4222
	DataDir  string // ALICIA_DATA_DIR, default ~/.local/share/alicia
	HTTPAddr string // ALICIA_HTTP_ADDR, default 127.0.0.1:8080
	// HTTPS serves the web client to the LAN (https.go).
	HTTPS HTTPS
	// APIKeys (ALICIA_API_KEYS or ALICIA_API_KEYS_FILE); when empty a
	// development key is generated and printed.
	APIKeys string
	// PostgresURL (ALICIA_POSTGRES_URL or ALICIA_POSTGRES_URL_FILE); when
	// empty the private cluster of pkg/localpg is started.
	PostgresURL string
	// Log is how up and its services log (ALICIA_LOG_FORMAT, ALICIA_LOG_LEVEL).
	Log telemetry.LogConfig
	// LiveKit is the voice server: ALICIA_LIVEKIT_URL's, else a
	// livekit-server up starts (see LiveKit). Its URL, key and secret reach
	// the services (gateway's room tokens, the room-agent) as ALICIA_LIVEKIT_URL,
	// ALICIA_LIVEKIT_API_KEY and ALICIA_LIVEKIT_API_SECRET.
	LiveKit LiveKit
	// TTSProbeURL is where up looks for a speech server when neither
	// ALICIA_TTS_URL nor ALICIA_TTS_ENGINE is set (the tts's default URL),
	// EmbeddingProbeURL where it looks for the embedding model when
	// ALICIA_EMBEDDING_URL is not (the llm's default URL): there `alicia dev
	// fake-models` serves them. Found, they are used; not found, or empty
	// (no lookup), up speaks with espeak-ng and memory search is off.
	TTSProbeURL, EmbeddingProbeURL string
	// Traces: with Traces.Jaeger (`alicia up --traces`, ALICIA_TRACES=true)
	// up runs Jaeger on 127.0.0.1 and exports every service's spans to it
	// (see Traces).
	Traces Traces
}

// DefaultConfig returns the defaults (DataDir excepted).
func DefaultConfig() Config {
	return Config{NATSURL: "nats://127.0.0.1:4222", HTTPAddr: "127.0.0.1:8080", HTTPS: defaultHTTPS(), LiveKit: defaultLiveKit(), Traces: defaultTraces(),
		Log:         telemetry.LogConfig{Format: telemetry.LogConsole, Level: zerolog.InfoLevel},
		TTSProbeURL: tts.DefaultConfig().URL, EmbeddingProbeURL: llm.DefaultConfig().LLMURL}
}

// ConfigFromEnv is ConfigFrom(config.Environ()), for the alicia command.
func ConfigFromEnv() (Config, error) { return ConfigFrom(config.Environ()) }

// ConfigFrom returns DefaultConfig overridden by src.
func ConfigFrom(src config.Source) (Config, error) {
	c := DefaultConfig()
	src.String("ALICIA_NATS_URL", &c.NATSURL)
	src.String("ALICIA_DATA_DIR", &c.DataDir)
	src.String("ALICIA_HTTP_ADDR", &c.HTTPAddr)
	lc, lerr := telemetry.LogConfigFrom(src)
	c.Log = lc
	if err := errors.Join(lerr,
		src.Secret("ALICIA_API_KEYS", &c.APIKeys),
		src.Secret("ALICIA_POSTGRES_URL", &c.PostgresURL)); err != nil {
		return c, err
	}
	if c.DataDir == "" {
		c.DataDir = opnats.DefaultDataDir()
	}
	if err := errors.Join(liveKitFrom(src, &c.LiveKit), tracesFrom(src, &c.Traces), httpsFrom(src, &c.HTTPS)); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("data directory is empty (ALICIA_DATA_DIR)"))
	}
	return errors.Join(append(errs, c.LiveKit.validate(), c.Traces.validate(), c.HTTPS.validate())...)
}

// Run starts embedded NATS (JetStream, fsync on every write), the private
// Postgres unless ALICIA_POSTGRES_URL is set, livekit-server unless
// ALICIA_LIVEKIT_URL is set, and the services (persistence, memory, llm,
// gateway, asr, tts and the room-agent), with the speech server and the
// embedding model found at the default URLs unless the environment names
// them; with cfg.Traces.Jaeger, Jaeger first, their spans exported to it. It prints where they are, the API key, which speech engine and ASR
// backend are used (and why) and whether the model backends answer, then
// blocks until ctx is cancelled and stops them cleanly.
func Run(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	log := cfg.Log.Logger(stderr)
	// Jaeger before the tracer provider, which exports to it; stopped
	// last, after the provider has flushed the services' spans.
	traces, err := startTraces(ctx, cfg.Traces, cfg.DataDir, stderr)
	if err != nil {
		return err
	}
	defer func() {
		if err := traces.stop(); err != nil {
			log.Warn().Err(err).Msg("stop jaeger")
		}
	}()
	// A tracer provider per service of this process, each with its own
	// service.name (alicia-gateway, alicia-llm, …, as when they run alone),
	// sharing one exporter: over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is
	// set, or to up's Jaeger (README, "Traces"). Each service runs on a
	// context marked with its name (telemetry.WithService), which names the
	// spans of the shared packages.
	st := servicesTracing
	st.Endpoint = traces.jaegerEndpoint()
	shutdownTracing, err := telemetry.SetupServicesTracing(ctx, "up", st)
	if err != nil {
		return err
	}
	defer func() { _ = shutdownTracing(context.Background()) }()
	if endpoint := traces.endpoint(); endpoint != "" {
		log.Info().Str("endpoint", endpoint).Msg("exporting traces over OTLP")
	}
	// Every service logs in as its own NATS user, with only the
	// permissions it needs (pkg/natsauth); the passwords change at each start.
	users := newNATSUsers()
	adminFile, err := users.writeAdminURL(cfg.NATSURL, cfg.DataDir)
	if err != nil {
		return err
	}
	ns, err := natsserver.Start(natsserver.Options{URL: cfg.NATSURL, StoreDir: filepath.Join(cfg.DataDir, "jetstream"), Users: users.server})
	if err != nil {
		return err
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	pgURL := cfg.PostgresURL
	if pgURL == "" {
		if pgURL, err = localpg.Ensure(ctx, localpg.Options{Log: stderr}); err != nil {
			return err
		}
	}
	roles, err := databaseRoles(ctx, pgURL, log)
	if err != nil {
		return err
	}
	// The schema comes before any service: the services would otherwise
	// wait for persistence to apply it.
	if err := migrate(ctx, roles.Migrator, log); err != nil {
		return err
	}
	// The LAN: LiveKit's node IP (unless one is set) and HTTPS for the
	// laptops and phones there, with up's local CA.
	lanAddrs := lanAddresses(stderr)
	cfg.LiveKit.NodeIP = nodeIP(cfg.LiveKit.NodeIP, lanAddrs)
	https, err := planHTTPS(cfg.HTTPS, lanAddrs, lan.HostNames(), cfg.DataDir, time.Now())
	if err != nil {
		return err
	}
	lk, err := startLiveKit(ctx, cfg.LiveKit, cfg.DataDir, stderr)
	if err != nil {
		return err
	}
	defer func() {
		if err := lk.stop(); err != nil {
			log.Warn().Err(err).Msg("stop livekit-server")
		}
	}()
	devKey := ""
	if cfg.APIKeys == "" {
		devKey = "dev-" + randomHex(16)
		cfg.APIKeys = "dev:" + devKey
	}
	src := stackSource(config.Environ(), cfg, pgURL, lk, devKey != "")
	sc, err := configure(ctx, cfg, users, src)
	if err != nil {
		return err
	}
	models := sc.backends()
	pcfg, gcfg, lcfg, mcfg, voice := sc.persistence, sc.gateway, sc.llm, sc.memory, sc.voice
	// One origin for page and voice: the gateway forwards LiveKit's
	// signalling, over HTTP on loopback and over HTTPS on the LAN.
	gcfg.LiveKit.SameOrigin = true
	httpsAddrs := make(chan []string, 1)
	gcfg.TLS = gateway.TLS{Addrs: https.addrs, CertFile: https.certFile, KeyFile: https.keyFile, Ready: func(a []string) { httpsAddrs <- a }}
	if https.ca != nil {
		gcfg.TLS.CAFile = https.ca.CACert
	}
	// persistence alone writes; up has migrated already.
	pcfg.PostgresURL, pcfg.Migrate = roles.Writer, false
	gcfg.PostgresURL, lcfg.PostgresURL, mcfg.PostgresURL = roles.Reader, roles.Reader, roles.Reader
	// The asr and tts read each conversation's language, voice and speed.
	voice.asr.PostgresURL, voice.tts.PostgresURL = roles.Reader, roles.Reader
	// The room-agent reads each conversation's hands-free mode.
	if voice.agent.postgres != nil {
		voice.agent.postgres(roles.Reader)
	}
	for url, service := range map[*string]string{&pcfg.NATSURL: natsauth.Persistence, &gcfg.NATSURL: natsauth.Gateway,
		&lcfg.NATSURL: natsauth.LLM, &mcfg.NATSURL: natsauth.Memory} {
		if *url, err = users.url(cfg.NATSURL, service); err != nil {
			return err
		}
	}

	services := append([]service{
		{"persistence", func(ctx context.Context, log zerolog.Logger) error { return persistence.Run(ctx, pcfg, log) }},
		{"memory", func(ctx context.Context, log zerolog.Logger) error { return memory.Run(ctx, mcfg, log) }},
		{"llm", func(ctx context.Context, log zerolog.Logger) error { return llm.Run(ctx, lcfg, log) }},
	}, voice.services()...)
	names := []string{"gateway"}
	g, gctx := errgroup.WithContext(ctx)
	for _, s := range services {
		names = append(names, s.name)
		g.Go(func() error {
			return s.run(telemetry.WithService(gctx, s.name), log.With().Str("service", s.name).Logger())
		})
	}
	addr := make(chan string, 1)
	g.Go(func() error {
		return gateway.Run(telemetry.WithService(gctx, "gateway"), gcfg, log.With().Str("service", "gateway").Logger(), func(a string) { addr <- a })
	})
	select {
	case a := <-addr:
		fmt.Fprintf(stdout, "Alicia is up\n  HTTP:     http://%s  (WebSocket ws://%s/v1/ws)\n", a, a)
		var listening []string
		select {
		case listening = <-httpsAddrs: // the gateway listens over HTTPS before it says ready
		default:
		}
		https.printHTTPS(stdout, listening)
		fmt.Fprintf(stdout, "  NATS:     %s (JetStream store %s; a user per service, the admin's URL in %s)\n  Postgres: %s\n  LiveKit:  %s\n",
			cfg.NATSURL, filepath.Join(cfg.DataDir, "jetstream"), adminFile, redact(pgURL), lk.describe())
		if devKey != "" {
			fmt.Fprintf(stdout, "  API key:  %s  (development key; set ALICIA_API_KEYS to choose your own)\n", devKey)
		}
		fmt.Fprintf(stdout, "  Services: %s\n", strings.Join(names, " "))
		if d := traces.describe(); d != "" {
			fmt.Fprintf(stdout, "  Traces:   %s\n", d)
		}
		if voice.agent.missing != "" {
			fmt.Fprintf(stdout, "  Room agent: %s\n", voice.agent.missing)
		}
		if voice.agent.vad != "" {
			fmt.Fprintf(stdout, "  VAD:      %s\n", voice.agent.vad)
		}
		printModels(gctx, stdout, models)
		fmt.Fprintln(stdout, "Ctrl-C stops.")
	case <-gctx.Done():
	}
	err = g.Wait()
	fmt.Fprintln(stdout, "Alicia stopped")
	return err
}

// servicesTracing names the services up runs for their tracer providers
// (telemetry.SetupServicesTracing): service.name alicia-<name>, the names
// their own commands give svcmain.Main. Spans of shared packages (pkg/edge,
// pkg/rpc) go to the service whose context they run on: each Run gets a
// marked context, and the gateway's HTTP requests and WebSocket sessions
// and the llm's preemptive answers carry their Run's context values.
var servicesTracing = telemetry.ServicesTracing{
	Services: []string{"persistence", "memory", "llm", "gateway", "asr", "tts", "room-agent"},
}

// stackSource is what the services up runs read their settings (model
// URLs, limits, …) from, as their own commands read the environment: base
// (the environment) with this stack's values laid over it. The process's
// environment is left as it is. devAdmin: the one local developer, holder
// of the generated key, administers the tools and MCP servers.
func stackSource(base config.Source, cfg Config, pgURL string, lk liveKitStack, devAdmin bool) config.Source {
	stack := map[string]string{"ALICIA_NATS_URL": cfg.NATSURL, "ALICIA_POSTGRES_URL": pgURL,
		"ALICIA_HTTP_ADDR": cfg.HTTPAddr, "ALICIA_API_KEYS": cfg.APIKeys,
		"ALICIA_LIVEKIT_URL": lk.URL, "ALICIA_LIVEKIT_API_KEY": lk.APIKey, "ALICIA_LIVEKIT_API_SECRET": lk.APISecret}
	// Unset: the values above win over files; each service gets its own
	// NATS user in its URL (natsUsers.url); HTTPS is up's (cfg.HTTPS),
	// given to the gateway in Run.
	for _, k := range []string{"ALICIA_POSTGRES_URL_FILE", "ALICIA_API_KEYS_FILE", "ALICIA_LIVEKIT_API_KEY_FILE", "ALICIA_LIVEKIT_API_SECRET_FILE",
		"ALICIA_HTTPS_ADDR", "ALICIA_TLS_CERT_FILE", "ALICIA_TLS_KEY_FILE", "ALICIA_TLS_CA_FILE",
		"ALICIA_NATS_USER", "ALICIA_NATS_PASSWORD", "ALICIA_NATS_PASSWORD_FILE"} {
		stack[k] = ""
	}
	if devAdmin {
		stack["ALICIA_ADMIN_USERS"], stack["ALICIA_ADMIN_USERS_FILE"] = "dev", ""
	}
	return base.Overlay("alicia up", stack)
}

// stackConfig is the configuration of the services up runs, read from
// the stack's source (stackSource), and what up found at the default
// model URLs.
type stackConfig struct {
	persistence persistence.Config
	gateway     gateway.Config
	llm         llm.Config
	memory      memory.Config
	voice       voiceServices
	defaults    defaultModels
}

// configure looks for the models src leaves unset (findDefaultModels),
// chooses the speech engine, then reads every service's configuration from
// src with what it found laid over it.
func configure(ctx context.Context, cfg Config, users natsUsers, src config.Source) (stackConfig, error) {
	var sc stackConfig
	sc.defaults, src = findDefaultModels(ctx, cfg, src)
	src = chooseSpeechEngine(src)
	var perr, gerr, lerr, merr, verr error
	sc.persistence, perr = persistence.ConfigFrom(src)
	sc.gateway, gerr = gateway.ConfigFrom(src)
	sc.llm, lerr = llm.ConfigFrom(src)
	sc.memory, merr = memory.ConfigFrom(src)
	sc.voice, verr = voiceFrom(src, users)
	if err := errors.Join(perr, gerr, lerr, merr, verr); err != nil {
		return sc, fmt.Errorf("configuration: %w", err)
	}
	// Up runs one LLM: memory extracts with it unless told otherwise (the
	// memory service alone has no default LLM URL).
	if sc.memory.LLMURL == "" {
		sc.memory.LLMURL = sc.llm.LLMURL
	}
	return sc, nil
}

// backends are the model engines of the banner, each with why up chose it.
func (sc stackConfig) backends() []backend {
	text, voice := textBackends(sc.llm, sc.memory), sc.voice.backends()
	text[1] = sc.defaults.embeddings.explain(text[1])
	voice[1] = sc.defaults.speech.explain(voice[1])
	return append(text, voice...)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

// databaseRoles makes the database's roles (pkg/localpg) when pgURL is a
// superuser's, as the private cluster's is, and returns their URLs; with
// another role's URL every service uses that one, as before.
func databaseRoles(ctx context.Context, pgURL string, log zerolog.Logger) (localpg.RoleURLs, error) {
	if err := pgread.WaitForSchema(ctx, pgURL, pgread.Reachable, time.Minute, log); err != nil {
		return localpg.RoleURLs{}, err
	}
	super, err := localpg.IsSuperuser(ctx, pgURL)
	if err != nil {
		return localpg.RoleURLs{}, fmt.Errorf("postgres: %w", err)
	}
	if !super {
		log.Warn().Msg("ALICIA_POSTGRES_URL is not a superuser's: every service uses it (no reader and writer roles; deploy/README.md)")
		return localpg.RoleURLs{Migrator: pgURL, Writer: pgURL, Reader: pgURL}, nil
	}
	return localpg.EnsureRoles(ctx, pgURL)
}

// migrate applies the migrations to pgURL, waiting for the server first.
func migrate(ctx context.Context, pgURL string, log zerolog.Logger) error {
	if err := pgread.WaitForSchema(ctx, pgURL, pgread.Reachable, time.Minute, log); err != nil {
		return err
	}
	db, err := sql.Open("pgx", pgURL)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer db.Close()
	if err := migrations.Up(ctx, db); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	log.Info().Msg("database schema up to date")
	return nil
}

// redact hides the password of a postgres:// URL.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
