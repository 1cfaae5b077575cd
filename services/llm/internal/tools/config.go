package tools

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/netguard"
)

// Config tunes the registry and its tools. DefaultConfig holds the defaults;
// ConfigFrom overrides them from ALICIA_* settings.
type Config struct {
	// Timeout bounds one tool call (ALICIA_TOOL_TIMEOUT, default 30s).
	Timeout time.Duration
	// Timeouts overrides Timeout for single tools
	// (ALICIA_TOOL_TIMEOUTS="web_search=10s,mcp_fs_read_file=1m").
	Timeouts map[string]time.Duration
	// MaxResultBytes caps the text an MCP tool returns to the model; longer
	// text is cut and marked (ALICIA_TOOL_MAX_RESULT_BYTES, default 64 KiB).
	MaxResultBytes int

	// WebSearchURL is the DuckDuckGo HTML endpoint's base URL; the search
	// goes to {WebSearchURL}/html/ (ALICIA_WEB_SEARCH_URL,
	// default https://html.duckduckgo.com).
	WebSearchURL string
	// WebSearchRegion is DuckDuckGo's kl region code, e.g. "fr-fr"; empty
	// lets DuckDuckGo choose (ALICIA_WEB_SEARCH_REGION).
	WebSearchRegion string
	// WebSearchTimeout bounds one search request (ALICIA_WEB_SEARCH_TIMEOUT, default 10s).
	WebSearchTimeout time.Duration
	// WebSearchMaxBytes caps the result page read (ALICIA_WEB_SEARCH_MAX_BYTES, default 2 MiB).
	WebSearchMaxBytes int
	// WebSearchUserAgent is sent with searches (ALICIA_WEB_SEARCH_USER_AGENT).
	WebSearchUserAgent string

	// MCPConnectTimeout bounds starting and initializing one MCP session
	// (ALICIA_MCP_CONNECT_TIMEOUT, default 20s).
	MCPConnectTimeout time.Duration
	// MCPPingInterval is how often a connected MCP server is pinged to find
	// out that it went away (ALICIA_MCP_PING_INTERVAL, default 15s).
	MCPPingInterval time.Duration
	// MCPBackoffMin and MCPBackoffMax bound the wait before reconnecting to
	// a server that failed or dropped; it doubles from min to max
	// (ALICIA_MCP_BACKOFF_MIN, default 500ms; ALICIA_MCP_BACKOFF_MAX, default 30s).
	MCPBackoffMin time.Duration
	MCPBackoffMax time.Duration
	// MCPStdio allows stdio MCP servers, which run a configured command on
	// this host (ALICIA_MCP_STDIO, default true). Turn it off when whoever
	// can configure MCP servers should not be able to run programs here.
	MCPStdio bool
	// MCPServersFile is the operator's JSON file of stdio MCP servers, the
	// only place they come from (ALICIA_MCP_SERVERS_FILE; empty: none). It
	// is read at start and whenever it changes, checked every
	// MCPServersPoll (ALICIA_MCP_SERVERS_POLL, default 5s).
	MCPServersFile string
	MCPServersPoll time.Duration
	// MCPAllowedHosts may be reached by HTTP MCP servers, and by web_search's
	// redirects, though they are not public addresses
	// (ALICIA_MCP_ALLOWED_HOSTS, comma-separated host names or IPs). Every
	// other destination must resolve, when it is dialled, to public
	// addresses only.
	MCPAllowedHosts []string
	// MCPResolver and MCPDial replace the system's resolver and dialer of
	// HTTP MCP sessions and web searches (tests); nil: the system's.
	MCPResolver netguard.Resolver
	MCPDial     netguard.DialFunc
}

// DefaultUserAgent identifies Alicia's web searches. DuckDuckGo's HTML
// endpoint serves browser-like agents; the product token says who asks.
const DefaultUserAgent = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36 Alicia/1.0"

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Timeout:            30 * time.Second,
		MaxResultBytes:     64 << 10,
		WebSearchURL:       "https://html.duckduckgo.com",
		WebSearchTimeout:   10 * time.Second,
		WebSearchMaxBytes:  2 << 20,
		WebSearchUserAgent: DefaultUserAgent,
		MCPConnectTimeout:  20 * time.Second,
		MCPPingInterval:    15 * time.Second,
		MCPBackoffMin:      500 * time.Millisecond,
		MCPBackoffMax:      30 * time.Second,
		MCPStdio:           true,
		MCPServersPoll:     5 * time.Second,
	}
}

// ConfigFrom returns DefaultConfig overridden by src.
func ConfigFrom(src config.Source) (Config, error) {
	c := DefaultConfig()
	var timeouts string
	src.String("ALICIA_TOOL_TIMEOUTS", &timeouts)
	src.String("ALICIA_WEB_SEARCH_URL", &c.WebSearchURL)
	src.String("ALICIA_WEB_SEARCH_REGION", &c.WebSearchRegion)
	src.String("ALICIA_WEB_SEARCH_USER_AGENT", &c.WebSearchUserAgent)
	src.String("ALICIA_MCP_SERVERS_FILE", &c.MCPServersFile)
	var allowed string
	src.String("ALICIA_MCP_ALLOWED_HOSTS", &allowed)
	for h := range strings.SplitSeq(allowed, ",") {
		if h = strings.TrimSpace(h); h != "" {
			c.MCPAllowedHosts = append(c.MCPAllowedHosts, h)
		}
	}
	perTool, terr := ParseTimeouts(timeouts)
	c.Timeouts = perTool
	err := errors.Join(
		terr,
		src.Duration("ALICIA_TOOL_TIMEOUT", &c.Timeout),
		src.Int("ALICIA_TOOL_MAX_RESULT_BYTES", &c.MaxResultBytes),
		src.Duration("ALICIA_WEB_SEARCH_TIMEOUT", &c.WebSearchTimeout),
		src.Int("ALICIA_WEB_SEARCH_MAX_BYTES", &c.WebSearchMaxBytes),
		src.Duration("ALICIA_MCP_CONNECT_TIMEOUT", &c.MCPConnectTimeout),
		src.Duration("ALICIA_MCP_PING_INTERVAL", &c.MCPPingInterval),
		src.Duration("ALICIA_MCP_BACKOFF_MIN", &c.MCPBackoffMin),
		src.Duration("ALICIA_MCP_BACKOFF_MAX", &c.MCPBackoffMax),
		src.Bool("ALICIA_MCP_STDIO", &c.MCPStdio),
		src.Duration("ALICIA_MCP_SERVERS_POLL", &c.MCPServersPoll),
	)
	return c, err
}

// ParseTimeouts reads "name=duration,name=duration".
func ParseTimeouts(s string) (map[string]time.Duration, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := map[string]time.Duration{}
	var errs []error
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, v, ok := strings.Cut(part, "=")
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if !ok || strings.TrimSpace(name) == "" || err != nil {
			errs = append(errs, fmt.Errorf("ALICIA_TOOL_TIMEOUTS: %q is not name=duration", part))
			continue
		}
		out[strings.TrimSpace(name)] = d
	}
	return out, errors.Join(errs...)
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if c.Timeout <= 0 {
		bad("ALICIA_TOOL_TIMEOUT must be positive")
	}
	for name, d := range c.Timeouts {
		if d <= 0 {
			bad("ALICIA_TOOL_TIMEOUTS: %s must be positive", name)
		}
	}
	if c.MaxResultBytes < 1024 {
		bad("ALICIA_TOOL_MAX_RESULT_BYTES must be at least 1024")
	}
	if u, err := url.Parse(c.WebSearchURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("ALICIA_WEB_SEARCH_URL %q is not an http(s) URL", c.WebSearchURL)
	}
	if c.WebSearchTimeout <= 0 {
		bad("ALICIA_WEB_SEARCH_TIMEOUT must be positive")
	}
	if c.WebSearchMaxBytes < 4096 {
		bad("ALICIA_WEB_SEARCH_MAX_BYTES must be at least 4096")
	}
	if strings.TrimSpace(c.WebSearchUserAgent) == "" {
		bad("ALICIA_WEB_SEARCH_USER_AGENT must not be empty")
	}
	if c.MCPConnectTimeout <= 0 {
		bad("ALICIA_MCP_CONNECT_TIMEOUT must be positive")
	}
	if c.MCPPingInterval <= 0 {
		bad("ALICIA_MCP_PING_INTERVAL must be positive")
	}
	if c.MCPBackoffMin <= 0 || c.MCPBackoffMax < c.MCPBackoffMin {
		bad("ALICIA_MCP_BACKOFF_MIN must be positive and at most ALICIA_MCP_BACKOFF_MAX")
	}
	if c.MCPServersPoll <= 0 {
		bad("ALICIA_MCP_SERVERS_POLL must be positive")
	}
	return errors.Join(errs...)
}

// TimeoutOf is the call timeout of the named tool.
func (c Config) TimeoutOf(name string) time.Duration {
	if d, ok := c.Timeouts[name]; ok {
		return d
	}
	return c.Timeout
}
