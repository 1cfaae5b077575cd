package gateway

import (
	"context"
	"crypto/tls"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"github.com/alicia-voice/alicia/pkg/backlog"
	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/pgread"
	"github.com/alicia-voice/alicia/pkg/promptver"
	"github.com/alicia-voice/alicia/pkg/svcmain"
	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/services/gateway/internal/auth"
	"github.com/alicia-voice/alicia/services/gateway/internal/capage"
	"github.com/alicia-voice/alicia/services/gateway/internal/httpmetrics"
	"github.com/alicia-voice/alicia/services/gateway/internal/livekit"
	"github.com/alicia-voice/alicia/services/gateway/internal/probe"
	"github.com/alicia-voice/alicia/services/gateway/internal/rest"
	"github.com/alicia-voice/alicia/services/gateway/internal/session"
	"github.com/alicia-voice/alicia/services/gateway/internal/store"
	"github.com/alicia-voice/alicia/services/gateway/internal/voices"
	"github.com/alicia-voice/alicia/services/gateway/internal/webui"
	"github.com/alicia-voice/alicia/services/gateway/internal/ws"
	"github.com/alicia-voice/alicia/services/gateway/web"
)

// livekitSignalPath is where LiveKit's client SDK signals, under the URL
// it is given: /rtc, /rtc/v1, /rtc/validate.
const livekitSignalPath = "/rtc"

// Run serves until ctx is cancelled, then drains: /readyz answers 503, the
// listener closes, WebSocket clients are told to reconnect (1012) and the
// requests in flight finish until the stop is forced
// (svcmain.WorkContext). ready, when not nil, receives the listening
// address once the server accepts connections.
func Run(ctx context.Context, cfg Config, log zerolog.Logger, ready func(addr string)) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	keys, _ := auth.ParseKeys(cfg.APIKeys)
	admins, unknown := auth.ParseAdmins(cfg.AdminUsers, keys)
	if len(unknown) > 0 {
		log.Warn().Strs("users", unknown).Msg("ALICIA_ADMIN_USERS names users of no API key; they are not administrators")
	}
	// Reads only: writes go through JetStream and the persistence service.
	if err := pgread.WaitForSchema(ctx, cfg.PostgresURL, pgread.Schema, 0, log); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	pool, err := pgread.Open(ctx, cfg.PostgresURL)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	defer pool.Close()
	nc, js, err := bus.Connect(ctx, cfg.NATSURL, "gateway", cfg.Streams, cfg.NATSAuth.Option())
	if err != nil {
		return err
	}
	defer nc.Close()

	st := store.New(pool)
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = rest.ErrorHandler(log)
	// The peer's address, never a header a client can write: failed
	// authentications are throttled by it. Behind a trusted proxy, the
	// client address the proxy appended to X-Forwarded-For.
	e.IPExtractor = ClientIP(cfg.TrustedProxies)
	e.Use(httpmetrics.Middleware(), middleware.Recover(), securityHeadersFor(cfg.CookieSecure))
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	e.GET("/livez", echo.WrapHandler(http.HandlerFunc(telemetry.Live)))
	e.GET("/readyz", func(c echo.Context) error {
		pctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
		defer cancel()
		// Anyone may ask: the answer names what is down, the log says why.
		// A draining gateway is not ready first of all: the load balancer
		// sends the connections it still opens elsewhere.
		if ctx.Err() != nil {
			return c.String(http.StatusServiceUnavailable, svcmain.ErrDraining.Error())
		}
		if !nc.IsConnected() {
			return c.String(http.StatusServiceUnavailable, "nats: not connected")
		}
		if err := pool.Ping(pctx); err != nil {
			log.Warn().Err(err).Msg("readyz: Postgres does not answer")
			return c.String(http.StatusServiceUnavailable, "postgres: unavailable")
		}
		return c.String(http.StatusOK, "ready")
	})
	if cfg.MetricsAddr == "" {
		e.GET("/metrics", echo.WrapHandler(promhttp.Handler()))
	} else {
		stop, err := telemetry.ServeMetrics(cfg.MetricsAddr, false, log)
		if err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
		defer stop()
	}

	// Web client sessions, shared by the replicas through NATS; how full
	// their bucket is goes to /metrics and, over 80 %, to the log.
	sessions, err := session.Open(ctx, js, session.Config{TTL: cfg.SessionTTL, PerUser: cfg.SessionsPerUser, Replicas: cfg.Streams.Replicas, Log: log})
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); sessions.Watch(watchCtx, time.Minute) }()
	defer func() { stopWatch(); <-watched }()
	cookie := session.Cookie{Secure: cfg.CookieSecure}
	verifier := auth.NewKeys(keys, admins)
	verifier.QueryTokenPath = "/v1/ws"
	verifier.Failures = auth.NewFailureLimiter(auth.FailureLimits{
		PerMinute: cfg.AuthFailuresPerMinute, Burst: cfg.AuthFailureBurst,
		AddressPerMinute: cfg.AuthAddressFailuresPerMinute, AddressBurst: cfg.AuthAddressFailureBurst,
		Tracked: cfg.AuthFailureAddresses})
	verifier.Sessions, verifier.Cookie, verifier.Log = sessions, cookie, log
	verifier.Origins = auth.Origins{Patterns: cfg.AllowedOrigins, Secure: cfg.CookieSecure}
	rates := middleware.NewRateLimiterMemoryStoreWithConfig(middleware.RateLimiterMemoryStoreConfig{Rate: rate.Limit(cfg.RateLimit), Burst: 2 * cfg.RateLimit, ExpiresIn: 3 * time.Minute})
	v1 := e.Group("/v1", verifier.Middleware(), middleware.RateLimiterWithConfig(middleware.RateLimiterConfig{
		Store:               rates,
		IdentifierExtractor: func(c echo.Context) (string, error) { return "user " + auth.UserOf(c), nil },
	}))
	// Signing in is limited per address (there is no user yet).
	(&rest.Sessions{Keys: verifier, Store: sessions, Cookie: cookie, Log: log}).Register(e, v1,
		middleware.BodyLimit("16K"), middleware.RateLimiterWithConfig(middleware.RateLimiterConfig{
			Store:               rates,
			IdentifierExtractor: func(c echo.Context) (string, error) { return "address " + c.RealIP(), nil },
		}))
	// Budgets in bytes and work, one account per user for the WebSocket and
	// the REST API, their usage over every replica read from Postgres.
	edge.RefusalMetrics()
	// Client input is refused while CONVERSATIONS holds too much that
	// persistence has not applied, before the stream could drop any of it.
	streamBacklog, err := backlog.Watch(ctx, js, backlog.Config{Limit: cfg.Quotas.BacklogLimit, Log: log})
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	defer streamBacklog.Stop()
	var accounts *edge.Accounts
	if !cfg.Quotas.Budgets.Off() {
		accounts = edge.NewAccounts(cfg.Quotas.Budgets, st, log)
		defer accounts.Wait()
	}
	wsh := &ws.Handler{JS: js, Auth: owners{st: st}, Log: log, QueueSize: cfg.QueueSize, OriginPatterns: cfg.AllowedOrigins,
		PingInterval: cfg.WSPingInterval, Limits: cfg.Quotas.Edge, Users: edge.NewUserRates(), Accounts: accounts, Budgets: cfg.Quotas.Budgets, Backlog: streamBacklog, ConnectionsPerUser: cfg.Quotas.ConnectionsPerUser}
	v1.GET("/ws", wsh.Serve)
	api := &rest.API{Store: st, Prompts: promptver.NewReader(pool), Admins: verifier.Admins, NC: nc, Pub: bus.NewPublisher(js), Pinger: pool, Log: log, WriteTimeout: cfg.WriteTimeout,
		MCPAllowedHosts: cfg.MCPAllowedHosts, WakeWords: cfg.WakeWords, StreamsPerUser: cfg.Quotas.ConnectionsPerUser, Accounts: accounts, Budgets: cfg.Quotas.Budgets, Backlog: streamBacklog,
		Probe: probe.New(map[string]probe.Backend{
			"llm":        probe.Backend(cfg.LLM),
			"asr":        probe.Backend(cfg.ASR),
			"tts":        probe.Backend(cfg.TTS),
			"embeddings": probe.Backend(cfg.Embeddings),
		}, probe.Options{})}
	api.Prefs = rest.Prefs{Defaults: cfg.Prefs, Voices: voices.New(cfg.TTS, cfg.ASR, nil, log)}
	if cfg.LiveKit.Enabled() {
		api.LiveKit = &livekit.Tokens{URL: cfg.LiveKit.ClientURL(), APIKey: cfg.LiveKit.APIKey, APISecret: cfg.LiveKit.APISecret, TTL: cfg.LiveKit.TokenTTL}
		api.Agents = livekit.Dispatcher{JS: js, RoomsPerUser: cfg.Quotas.RoomsPerUser}
		api.Rooms = livekit.NewRooms(cfg.LiveKit.URL, cfg.LiveKit.APIKey, cfg.LiveKit.APISecret)
		if cfg.LiveKit.SameOrigin {
			proxy, err := livekit.SignalProxy(cfg.LiveKit.URL)
			if err != nil {
				return err
			}
			api.LiveKitSameOrigin = true
			e.Any(livekitSignalPath, echo.WrapHandler(proxy))
			e.Any(livekitSignalPath+"/*", echo.WrapHandler(proxy))
		}
	}
	ca, err := capage.New(cfg.TLS.CAFile)
	if err != nil {
		return err
	}
	ca.Register(e)
	cfg.TimelineReads.Limit(api)
	api.Register(v1.Group("", middleware.BodyLimit("1M")))
	wsh.ServerInfo = api.ServerInfo
	endKeys, stopRevocations, err := revocations(watchCtx, nc, sessions, wsh, api, log)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	defer stopRevocations()
	// The keys' and administrators' files are read again when they change:
	// a removed key ends what it opened (keys_reload.go).
	if reloader := newKeysReloader(cfg, verifier, endKeys, log); reloader != nil {
		reloadCtx, stopReload := context.WithCancel(watchCtx)
		reloaded := make(chan struct{})
		go func() { defer close(reloaded); reloader.run(reloadCtx) }()
		defer func() { stopReload(); <-reloaded }()
	}
	ui, err := serveWebClient(e, cfg)
	if err != nil {
		return err
	}
	// The large files' gzip is made in the background from the start.
	warmCtx, stopWarm := context.WithCancel(ctx)
	warmed := make(chan struct{})
	go func() { defer close(warmed); ui.Warm(warmCtx) }()
	defer func() { stopWarm(); <-warmed }()
	if routes, ok := ctx.Value(routesKey{}).(func([]*echo.Route)); ok {
		routes(e.Routes())
	}

	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("gateway: listen: %w", err)
	}
	// HTTPS, beside: the same handler on its own listeners.
	var tlsLns []net.Listener
	defer func() {
		for _, l := range tlsLns {
			_ = l.Close()
		}
	}()
	var tlsConfig *tls.Config
	if cfg.TLS.Enabled() {
		certs, err := newCertReloader(cfg.TLS.CertFile, cfg.TLS.KeyFile)
		if err != nil {
			ln.Close()
			return err
		}
		tlsConfig = certs.tlsConfig()
		for _, a := range cfg.TLS.Addrs {
			l, err := net.Listen("tcp", a)
			if err != nil {
				ln.Close()
				return fmt.Errorf("gateway: listen (HTTPS): %w", err)
			}
			tlsLns = append(tlsLns, l)
		}
	}
	// A hijacked WebSocket connection drops these deadlines (net/http clears
	// them); ws pings it instead.
	srv := &http.Server{Handler: e, ReadHeaderTimeout: min(10*time.Second, cfg.HTTPReadTimeout),
		ReadTimeout: cfg.HTTPReadTimeout, IdleTimeout: cfg.HTTPIdleTimeout,
		// Requests carry Run's context values (the service's tracing mark
		// under alicia up), not its end: a drain lets them finish.
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) }}
	errc := make(chan error, 1+len(tlsLns))
	go func() { errc <- srv.Serve(ln) }()
	log.Info().Str("addr", ln.Addr().String()).Msg("gateway listening")
	if len(tlsLns) > 0 {
		var addrs []string
		for _, l := range tlsLns {
			go func() { errc <- srv.Serve(tls.NewListener(l, tlsConfig)) }()
			addrs = append(addrs, l.Addr().String())
		}
		tlsLns = nil // Shutdown closes them
		ca.SetHTTPS(addrs)
		log.Info().Strs("addrs", addrs).Msg("gateway listening over HTTPS")
		if cfg.TLS.Ready != nil {
			cfg.TLS.Ready(addrs)
		}
	}
	if ready != nil {
		ready(ln.Addr().String())
	}
	select {
	case err := <-errc:
		return fmt.Errorf("gateway: serve: %w", err)
	case <-ctx.Done():
	}
	log.Info().Msg("draining: no new connections; in-flight requests finish, WebSocket clients are told to reconnect")
	// The drain: the listener closes at once (no new connections or
	// WebSockets), requests in flight finish until the stop is forced, then
	// the connections still open are closed.
	work := svcmain.WorkContext(ctx)
	if svcmain.Forced(ctx) == nil {
		// Run outside svcmain.Serve (tests): no drain, a short grace.
		var cancel context.CancelFunc
		work, cancel = context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
	}
	served := make(chan error, 1)
	go func() { served <- srv.Shutdown(work) }()
	sctx, cancel := context.WithTimeout(work, 10*time.Second)
	defer cancel()
	// WebSocket clients are told to reconnect (1012, to another replica)
	// at once: net/http's Shutdown does not reach hijacked connections.
	if err := wsh.Shutdown(sctx); err != nil {
		log.Warn().Err(err).Msg("WebSocket sessions still open at shutdown")
	}
	// So are timeline streams (EventSource reconnects by itself); Shutdown
	// would wait for them until it is forced.
	if err := api.Shutdown(sctx); err != nil {
		log.Warn().Err(err).Msg("timeline streams still open at shutdown")
	}
	if err := <-served; err != nil {
		// Forced: the requests still running are cut off.
		log.Warn().Err(err).Msg("requests still in flight when the stop was forced; closing their connections")
		_ = srv.Close()
	}
	return nil
}

// routesKey carries, in Run's context, a function that is given every
// route Run registered (the contract test holds them to the OpenAPI
// document).
type routesKey struct{}

// RegisterMetrics registers the gateway's metrics (the sessions bucket's
// size, the HTTP requests) on the default registry, as Run does.
func RegisterMetrics() { session.RegisterMetrics(); httpmetrics.Register() }

// serveWebClient serves the embedded build of the web client on GET and
// HEAD of every path the API, the probes and the metrics do not own; an
// unknown /v1 route keeps its JSON 404.
func serveWebClient(e *echo.Echo, cfg Config) (*webui.Handler, error) {
	dist, err := fs.Sub(web.Dist, "dist")
	if err != nil {
		return nil, fmt.Errorf("gateway: web client: %w", err)
	}
	opts := webui.Options{Reserved: append([]string{"/v1", "/healthz", "/livez", "/readyz", "/metrics", livekitSignalPath}, capage.Paths...)}
	if cfg.LiveKit.Enabled() && !cfg.LiveKit.SameOrigin {
		opts.LiveKitURL = cfg.LiveKit.ClientURL()
	}
	ui, err := webui.New(dist, opts)
	if err != nil {
		return nil, fmt.Errorf("gateway: web client: %w", err)
	}
	e.GET("/*", ui.Serve)
	e.HEAD("/*", ui.Serve)
	return ui, nil
}
