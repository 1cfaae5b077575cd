// Package gateway is Alicia's HTTP edge: API keys, health and metrics, the
// REST API under /v1 (API.md) and the WebSocket transport for protocol
// envelopes (/v1/ws). It reads Postgres through a read-only session and
// writes only by publishing to JetStream, answering once persistence has
// applied the write.
package gateway

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/engines"
	"github.com/alicia-voice/alicia/pkg/pgread"
	"github.com/alicia-voice/alicia/pkg/prefs"
	"github.com/alicia-voice/alicia/pkg/svcmain"
	"github.com/alicia-voice/alicia/pkg/wake"
	"github.com/alicia-voice/alicia/services/gateway/internal/auth"
	"github.com/alicia-voice/alicia/services/gateway/internal/session"
)

// Config of the gateway. Defaults in code, overridden by ALICIA_*
// settings (ConfigFrom).
type Config struct {
	HTTPAddr string // ALICIA_HTTP_ADDR
	// TLS serves HTTPS beside HTTPAddr (tls.go).
	TLS TLS
	// MetricsAddr, when set, serves /metrics (and /healthz, /livez) on an
	// address of its own instead of beside the API on HTTPAddr, so the
	// port clients reach shows no metrics (ALICIA_GATEWAY_METRICS_ADDR,
	// default none: /metrics on HTTPAddr).
	svcmain.Metrics
	// Bus is NATS: ALICIA_NATS_URL, ALICIA_NATS_USER, ALICIA_NATS_PASSWORD (+ _FILE).
	svcmain.Bus

	// Postgres: ALICIA_POSTGRES_URL (+ _FILE).
	pgread.Postgres
	APIKeys string // ALICIA_API_KEYS (+ _FILE): "key,…" or "user:key,…", entries also one a line
	// AdminUsers names the administrators, users of APIKeys
	// (ALICIA_ADMIN_USERS + _FILE, comma-separated; default none). Only they
	// change tools and MCP servers and see their internals.
	AdminUsers string
	// APIKeysFile and AdminUsersFile are the files APIKeys and AdminUsers
	// were read from (ALICIA_API_KEYS_FILE, ALICIA_ADMIN_USERS_FILE, when
	// the variable itself is empty): the gateway reads them again when they
	// change (keys_reload.go), so a key removed there stops working, and
	// what it opened closes, without a restart. APIKeys and AdminUsers
	// hold what they held at start.
	APIKeysFile, AdminUsersFile string
	// AuthFailuresPerMinute and AuthFailureBurst bound the failures of one
	// wrong key from one client address (ALICIA_AUTH_FAILURES_PER_MINUTE,
	// default 10; ALICIA_AUTH_FAILURE_BURST, default 10): beyond, that key
	// gets 429 with Retry-After. AuthAddressFailuresPerMinute and
	// AuthAddressFailureBurst bound the failures of every key from one
	// address (ALICIA_AUTH_ADDRESS_FAILURES_PER_MINUTE, default 30;
	// ALICIA_AUTH_ADDRESS_FAILURE_BURST, default 100): beyond, wrong keys
	// and keys not used from the address before get 429 (auth.FailureLimiter).
	// At most AuthFailureAddresses entries are tracked in each table
	// (ALICIA_AUTH_FAILURE_ADDRESSES, default 10000).
	AuthFailuresPerMinute        int
	AuthFailureBurst             int
	AuthAddressFailuresPerMinute int
	AuthAddressFailureBurst      int
	AuthFailureAddresses         int
	// MCPAllowedHosts may be used by HTTP MCP servers though they are not
	// public addresses (ALICIA_MCP_ALLOWED_HOSTS, comma-separated host names
	// or IPs, as the llm reads it).
	MCPAllowedHosts []string
	// WakeWords address Alicia in hands-free mode (ALICIA_WAKE_WORDS,
	// comma-separated, "alicia", as the room-agent reads it): server-info
	// lists them (none: pkg/wake's default).
	WakeWords []string
	// RateLimit is requests per second per API key (ALICIA_RATE_LIMIT, default 20; burst twice that).
	RateLimit int
	// QueueSize bounds the envelopes waiting for one WebSocket client (ALICIA_WS_QUEUE, default 256).
	QueueSize int
	// AllowedOrigins are extra browser origins allowed to open /v1/ws and
	// to act with a session cookie (ALICIA_ALLOWED_ORIGINS, comma-separated
	// host patterns such as app.example.com or *.example.com, or origins
	// with their scheme such as https://app.example.com); the gateway's
	// own origin always is.
	AllowedOrigins []string
	// SessionTTL is how long a web client's session lasts
	// (ALICIA_SESSION_TTL, default 168h; 1m..8760h).
	SessionTTL time.Duration
	// SessionsPerUser bounds the sessions a user holds at once
	// (ALICIA_SESSIONS_PER_USER, default 20; 1..1000): signing in beyond
	// ends the oldest.
	SessionsPerUser int
	// CookieSecure marks the session cookie Secure and makes the gateway's
	// own origin https even for plain-HTTP requests: set it behind a TLS
	// proxy (ALICIA_COOKIE_SECURE, default false; requests over TLS get a
	// Secure cookie anyway).
	CookieSecure bool
	// TrustedProxies are the reverse proxies (addresses or CIDR ranges,
	// ALICIA_TRUSTED_PROXIES, comma-separated; default none) whose
	// X-Forwarded-For the gateway believes: a request from one of them is
	// counted against the client address it names (failed sign-ins, the
	// per-address rate limit) instead of the proxy's own, which every
	// client behind it shares. From any other peer the header is ignored,
	// so a client cannot choose the address it is counted under.
	TrustedProxies []*net.IPNet
	// The model engines server-info describes and probes, read from the
	// variables (and with the defaults) of the services that use them, so
	// it describes the engines actually running. URLs are OpenAI-compatible
	// base URLs ending in /v1; an empty one is "not configured".
	LLM engines.Engine // ALICIA_LLM_URL, ALICIA_LLM_MODEL, ALICIA_LLM_API_KEY (+ _FILE): as the llm
	ASR engines.Engine // ALICIA_ASR_URL (/v1 added as the asr does), ALICIA_ASR_MODEL, ALICIA_ASR_API_KEY (+ _FILE)
	// TTS is as the tts reads it: ALICIA_TTS_ENGINE (openai or espeak),
	// ALICIA_TTS_URL (/v1 added), ALICIA_TTS_MODEL, ALICIA_TTS_VOICE (the
	// engine's default voice unless set), ALICIA_TTS_API_KEY (+ _FILE),
	// ALICIA_ESPEAK_PATH.
	TTS engines.Engine
	// Prefs are the installation's voice, speaking rate, language and time
	// zone, as the tts, asr and llm read them (ALICIA_TTS_VOICE,
	// ALICIA_TTS_SPEED, ALICIA_ASR_LANGUAGE, ALICIA_TIME_ZONE): what
	// applies to a conversation whose person chose none (pkg/prefs).
	Prefs      prefs.Defaults
	Embeddings engines.Engine // ALICIA_EMBEDDING_URL, ALICIA_EMBEDDING_MODEL, ALICIA_EMBEDDING_API_KEY (+ _FILE): as the memory
	// WriteTimeout bounds a REST write: publish, then wait until persistence
	// has applied it (ALICIA_WRITE_TIMEOUT, default 10s; 504 beyond).
	WriteTimeout time.Duration
	// LiveKit is the server voice clients join (GET /v1/conversations/{id}/token);
	// unset, that route answers 503.
	LiveKit LiveKit
	// HTTPReadTimeout bounds reading one request, body included
	// (ALICIA_HTTP_READ_TIMEOUT, default 30s); HTTPIdleTimeout closes a
	// keep-alive connection idle that long (ALICIA_HTTP_IDLE_TIMEOUT,
	// default 2m). WebSockets are not bound by either: they are pinged
	// every WSPingInterval (ALICIA_WS_PING, default 30s) and dropped when
	// a ping goes unanswered that long.
	HTTPReadTimeout, HTTPIdleTimeout, WSPingInterval time.Duration

	// Quotas bound envelopes, connections and voice rooms per user (quotas.go).
	Quotas Quotas
	// TimelineReads bound the timeline pages read at once (timeline_config.go).
	TimelineReads TimelineReads
}

// LiveKit is the LiveKit server the gateway hands out tokens for.
type LiveKit struct {
	// URL of the server (ALICIA_LIVEKIT_URL, ws(s):// or http(s)://).
	URL string
	// PublicURL is the URL given to clients when they reach the server at
	// another address than the services do (ALICIA_LIVEKIT_PUBLIC_URL;
	// default URL).
	PublicURL string
	// APIKey and APISecret sign the tokens (ALICIA_LIVEKIT_API_KEY,
	// ALICIA_LIVEKIT_API_SECRET, + _FILE).
	APIKey, APISecret string
	// TokenTTL is how long a token lets a client join (ALICIA_LIVEKIT_TOKEN_TTL,
	// default 5m): a client asks for a new one to join again, which a
	// revoked session cannot get; once in the room LiveKit renews it.
	TokenTTL time.Duration
	// SameOrigin: the gateway forwards LiveKit's signalling (/rtc, /rtc/…)
	// to URL, and gives each client the WebSocket origin of the page it
	// came from as the LiveKit URL (ALICIA_LIVEKIT_SAME_ORIGIN, default
	// false; `alicia up` turns it on): one name and one certificate for
	// page and voice. PublicURL is then not used.
	SameOrigin bool
}

// Enabled reports whether LiveKit is configured.
func (l LiveKit) Enabled() bool { return l.URL != "" || l.APIKey != "" || l.APISecret != "" }

// ClientURL is the URL clients connect to.
func (l LiveKit) ClientURL() string {
	if l.PublicURL != "" {
		return l.PublicURL
	}
	return l.URL
}

// LiveKitFrom sets c.LiveKit from ALICIA_LIVEKIT_* of src (secrets also
// from _FILE).
func (c *Config) LiveKitFrom(src config.Source) error {
	src.String("ALICIA_LIVEKIT_URL", &c.LiveKit.URL)
	src.String("ALICIA_LIVEKIT_PUBLIC_URL", &c.LiveKit.PublicURL)
	return errors.Join(
		src.Bool("ALICIA_LIVEKIT_SAME_ORIGIN", &c.LiveKit.SameOrigin),
		src.Secret("ALICIA_LIVEKIT_API_KEY", &c.LiveKit.APIKey),
		src.Secret("ALICIA_LIVEKIT_API_SECRET", &c.LiveKit.APISecret),
		src.Duration("ALICIA_LIVEKIT_TOKEN_TTL", &c.LiveKit.TokenTTL),
	)
}

func (l LiveKit) validate() error {
	if !l.Enabled() {
		if l.SameOrigin {
			return errors.New("ALICIA_LIVEKIT_SAME_ORIGIN needs a LiveKit server (ALICIA_LIVEKIT_URL, ALICIA_LIVEKIT_API_KEY, ALICIA_LIVEKIT_API_SECRET)")
		}
		return nil
	}
	var errs []error
	for _, u := range []struct{ name, v string }{{"ALICIA_LIVEKIT_URL", l.URL}, {"ALICIA_LIVEKIT_PUBLIC_URL", l.PublicURL}} {
		if u.v == "" && u.name == "ALICIA_LIVEKIT_PUBLIC_URL" {
			continue
		}
		p, err := url.Parse(u.v)
		if err != nil || (p.Scheme != "ws" && p.Scheme != "wss" && p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			errs = append(errs, fmt.Errorf("%s %q: want a ws(s):// or http(s):// URL of the LiveKit server", u.name, u.v))
		}
	}
	if l.APIKey == "" || l.APISecret == "" {
		errs = append(errs, errors.New("LiveKit needs ALICIA_LIVEKIT_URL, ALICIA_LIVEKIT_API_KEY and ALICIA_LIVEKIT_API_SECRET together"))
	}
	if l.TokenTTL < time.Minute || l.TokenTTL > 24*time.Hour {
		errs = append(errs, fmt.Errorf("ALICIA_LIVEKIT_TOKEN_TTL %s: want 1m..24h", l.TokenTTL))
	}
	return errors.Join(errs...)
}

// ModelsFrom sets the model engines from ALICIA_{LLM,ASR,TTS,EMBEDDING}_{URL,MODEL,API_KEY}
// (keys also from _FILE) and ALICIA_TTS_ENGINE, ALICIA_TTS_VOICE and
// ALICIA_ESPEAK_PATH of src.
func (c *Config) ModelsFrom(src config.Source) error {
	src.String("ALICIA_TTS_ENGINE", &c.TTS.Kind)
	src.String("ALICIA_ESPEAK_PATH", &c.TTS.Path)
	c.TTS.Voice = "" // the default follows the engine
	src.String("ALICIA_TTS_VOICE", &c.TTS.Voice)
	if c.TTS.Voice == "" {
		c.TTS.Voice = engines.DefaultVoice(c.TTS.Kind)
	}
	err := errors.Join(
		engineFrom(src, "LLM", &c.LLM),
		engineFrom(src, "ASR", &c.ASR),
		engineFrom(src, "TTS", &c.TTS),
		engineFrom(src, "EMBEDDING", &c.Embeddings),
	)
	// The asr and tts services call …/v1 whether or not the URL ends in it.
	c.ASR.URL, c.TTS.URL = engines.V1(c.ASR.URL), engines.V1(c.TTS.URL)
	c.Prefs.Voice, c.Prefs.SpeechSpeed, c.Prefs.TimeZone = c.TTS.Voice, 1, "UTC"
	src.String("ALICIA_ASR_LANGUAGE", &c.Prefs.Language)
	src.String("ALICIA_TIME_ZONE", &c.Prefs.TimeZone)
	return errors.Join(err, src.Float64("ALICIA_TTS_SPEED", &c.Prefs.SpeechSpeed))
}

// engineFrom reads ALICIA_{prefix}_URL, _MODEL and _API_KEY (+ _FILE) of src.
func engineFrom(src config.Source, prefix string, e *engines.Engine) error {
	src.String("ALICIA_"+prefix+"_URL", &e.URL)
	src.String("ALICIA_"+prefix+"_MODEL", &e.Model)
	return src.Secret("ALICIA_"+prefix+"_API_KEY", &e.APIKey)
}

func validateEngine(prefix string, e engines.Engine) error {
	switch {
	case e.Kind == engines.Espeak && prefix == "TTS":
		if e.Path == "" {
			return errors.New("espeak-ng path is empty (ALICIA_ESPEAK_PATH)")
		}
		return nil
	case e.Kind != engines.OpenAI && e.Kind != "" && prefix == "TTS":
		return fmt.Errorf("ALICIA_TTS_ENGINE %q is neither %s nor %s", e.Kind, engines.OpenAI, engines.Espeak)
	case e.Kind != engines.OpenAI && e.Kind != "":
		return fmt.Errorf("%s engine %q: only %s is supported", prefix, e.Kind, engines.OpenAI)
	case e.URL == "":
		return nil
	}
	u, err := url.Parse(e.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("ALICIA_%s_URL %q: want an http(s) URL such as http://host:8000/v1", prefix, e.URL)
	}
	return nil
}

// metricsAddrVar names the gateway's metrics address.
const metricsAddrVar = "ALICIA_GATEWAY_METRICS_ADDR"

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{HTTPAddr: "127.0.0.1:8080", Bus: svcmain.DefaultBus(), RateLimit: 20, QueueSize: 256, WriteTimeout: 10 * time.Second,
		AuthFailuresPerMinute: 10, AuthFailureBurst: 10, AuthFailureAddresses: 10000,
		AuthAddressFailuresPerMinute: 30, AuthAddressFailureBurst: 100, SessionsPerUser: 20,
		HTTPReadTimeout: 30 * time.Second, HTTPIdleTimeout: 2 * time.Minute, WSPingInterval: 30 * time.Second,
		SessionTTL: 7 * 24 * time.Hour,
		LiveKit:    LiveKit{TokenTTL: 5 * time.Minute},
		Quotas:     DefaultQuotas(), TimelineReads: DefaultTimelineReads(),
		LLM:        engines.Engine{Kind: engines.OpenAI, URL: engines.DefaultLLMURL, Model: engines.DefaultLLMModel},
		ASR:        engines.Engine{Kind: engines.OpenAI, URL: engines.V1(engines.DefaultASRURL), Model: engines.DefaultASRModel},
		TTS:        engines.Engine{Kind: engines.OpenAI, URL: engines.V1(engines.DefaultTTSURL), Model: engines.DefaultTTSModel, Voice: engines.DefaultVoice(engines.OpenAI), Path: engines.DefaultEspeakPath},
		Embeddings: engines.Engine{Kind: engines.OpenAI, Model: engines.DefaultEmbeddingModel}, // memory search is off without a URL
	}
}

// ConfigFromEnv is ConfigFrom(config.Environ()), for the gateway command.
func ConfigFromEnv() (Config, error) { return ConfigFrom(config.Environ()) }

// ConfigFrom returns DefaultConfig overridden by src.
func ConfigFrom(src config.Source) (Config, error) {
	c := DefaultConfig()
	src.String("ALICIA_HTTP_ADDR", &c.HTTPAddr)
	c.Metrics.From(src, metricsAddrVar)
	var origins string
	src.String("ALICIA_ALLOWED_ORIGINS", &origins)
	c.AllowedOrigins = splitList(origins)
	var allowed string
	src.String("ALICIA_MCP_ALLOWED_HOSTS", &allowed)
	c.MCPAllowedHosts = splitList(allowed)
	c.WakeWords = wake.ParseWords(src.Get(wake.EnvWords))
	var proxies string
	src.String("ALICIA_TRUSTED_PROXIES", &proxies)
	var proxyErr error
	c.TrustedProxies, proxyErr = ParseProxies(proxies)
	err := errors.Join(
		c.Bus.From(src),
		proxyErr,
		c.Postgres.From(src),
		src.Secret("ALICIA_API_KEYS", &c.APIKeys),
		src.Secret("ALICIA_ADMIN_USERS", &c.AdminUsers),
		src.Int("ALICIA_AUTH_FAILURES_PER_MINUTE", &c.AuthFailuresPerMinute),
		src.Int("ALICIA_AUTH_FAILURE_BURST", &c.AuthFailureBurst),
		src.Int("ALICIA_AUTH_ADDRESS_FAILURES_PER_MINUTE", &c.AuthAddressFailuresPerMinute),
		src.Int("ALICIA_AUTH_ADDRESS_FAILURE_BURST", &c.AuthAddressFailureBurst),
		src.Int("ALICIA_AUTH_FAILURE_ADDRESSES", &c.AuthFailureAddresses),
		src.Int("ALICIA_RATE_LIMIT", &c.RateLimit),
		src.Int("ALICIA_WS_QUEUE", &c.QueueSize),
		src.Duration("ALICIA_WRITE_TIMEOUT", &c.WriteTimeout),
		src.Duration("ALICIA_HTTP_READ_TIMEOUT", &c.HTTPReadTimeout),
		src.Duration("ALICIA_HTTP_IDLE_TIMEOUT", &c.HTTPIdleTimeout),
		src.Duration("ALICIA_WS_PING", &c.WSPingInterval),
		src.Duration("ALICIA_SESSION_TTL", &c.SessionTTL),
		src.Int("ALICIA_SESSIONS_PER_USER", &c.SessionsPerUser),
		src.Bool("ALICIA_COOKIE_SECURE", &c.CookieSecure),
		c.ModelsFrom(src),
		c.LiveKitFrom(src),
		c.QuotasFrom(src),
		c.TimelineReads.From(src),
	)
	c.TLSFrom(src)
	if err != nil {
		return c, err
	}
	c.APIKeysFile, c.AdminUsersFile = src.SecretFile("ALICIA_API_KEYS"), src.SecretFile("ALICIA_ADMIN_USERS")
	return c, c.Validate()
}

// ParseProxies reads ALICIA_TRUSTED_PROXIES: comma-separated addresses
// (a single host) or CIDR ranges.
func ParseProxies(s string) ([]*net.IPNet, error) {
	var out []*net.IPNet
	var errs []error
	for _, p := range splitList(s) {
		if !strings.Contains(p, "/") {
			ip := net.ParseIP(p)
			if ip == nil {
				errs = append(errs, fmt.Errorf("ALICIA_TRUSTED_PROXIES: %q is neither an address nor a CIDR range", p))
				continue
			}
			bits := 128
			if ip4 := ip.To4(); ip4 != nil {
				ip, bits = ip4, 32
			}
			out = append(out, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
			continue
		}
		_, n, err := net.ParseCIDR(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("ALICIA_TRUSTED_PROXIES: %w", err))
			continue
		}
		out = append(out, n)
	}
	return out, errors.Join(errs...)
}

// splitList reads a comma-separated list, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, o := range strings.Split(s, ",") {
		if o = strings.TrimSpace(o); o != "" {
			out = append(out, o)
		}
	}
	return out
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		errs = append(errs, fmt.Errorf("ALICIA_HTTP_ADDR %q: %w", c.HTTPAddr, err))
	}
	errs = append(errs, c.Metrics.Validate(metricsAddrVar), c.Bus.Validate(), c.Postgres.Validate())
	if _, err := auth.ParseKeys(c.APIKeys); err != nil {
		errs = append(errs, fmt.Errorf("ALICIA_API_KEYS: %w", err))
	}
	if c.AuthFailuresPerMinute < 1 || c.AuthFailureBurst < 1 || c.AuthFailureAddresses < 1 ||
		c.AuthAddressFailuresPerMinute < 1 || c.AuthAddressFailureBurst < 1 {
		errs = append(errs, errors.New("ALICIA_AUTH_FAILURES_PER_MINUTE, ALICIA_AUTH_FAILURE_BURST, ALICIA_AUTH_ADDRESS_FAILURES_PER_MINUTE, "+
			"ALICIA_AUTH_ADDRESS_FAILURE_BURST and ALICIA_AUTH_FAILURE_ADDRESSES must be at least 1"))
	}
	if c.RateLimit < 1 {
		errs = append(errs, fmt.Errorf("rate limit %d must be at least 1", c.RateLimit))
	}
	if c.QueueSize < 1 {
		errs = append(errs, fmt.Errorf("WebSocket queue %d must be at least 1", c.QueueSize))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"ALICIA_HTTP_READ_TIMEOUT", c.HTTPReadTimeout}, {"ALICIA_HTTP_IDLE_TIMEOUT", c.HTTPIdleTimeout}, {"ALICIA_WS_PING", c.WSPingInterval}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s %s must be positive", d.name, d.v))
		}
	}
	if c.SessionTTL < time.Minute || c.SessionTTL > 365*24*time.Hour {
		errs = append(errs, fmt.Errorf("ALICIA_SESSION_TTL %s: want 1m..8760h", c.SessionTTL))
	}
	if c.SessionsPerUser < 1 || c.SessionsPerUser > session.MaxPerUser {
		errs = append(errs, fmt.Errorf("ALICIA_SESSIONS_PER_USER %d: want 1..%d", c.SessionsPerUser, session.MaxPerUser))
	}
	if err := auth.ValidatePatterns(c.AllowedOrigins); err != nil {
		errs = append(errs, fmt.Errorf("ALICIA_ALLOWED_ORIGINS: %w", err))
	}
	if c.WriteTimeout < time.Second {
		errs = append(errs, fmt.Errorf("write timeout %s must be at least 1s (ALICIA_WRITE_TIMEOUT)", c.WriteTimeout))
	}
	errs = append(errs, validateEngine("LLM", c.LLM), validateEngine("ASR", c.ASR), validateEngine("TTS", c.TTS),
		validateEngine("EMBEDDING", c.Embeddings), c.LiveKit.validate(), c.Quotas.validate(), c.TLS.validate(), c.TimelineReads.Validate())
	return errors.Join(errs...)
}
