package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/pkg/netguard"
)

// WebSearchName is the web_search tool's name.
const WebSearchName = "web_search"

// Result counts of web_search.
const (
	webDefaultLimit = 5
	webMaxLimit     = 10
)

// webSearch queries DuckDuckGo's HTML endpoint, which needs no API key,
// and reads the result page with a real HTML parser.
type webSearch struct {
	endpoint  *url.URL // {base}/html/
	region    string
	userAgent string
	maxBytes  int64
	client    *http.Client
}

// NewWebSearch returns the web_search tool: {query, limit?} → {query,
// results: [{title, url, snippet}]}. It uses cfg's WebSearch* settings.
func NewWebSearch(cfg Config) (Tool, error) {
	base, err := url.Parse(strings.TrimRight(cfg.WebSearchURL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("%w: web search URL %q is not an http(s) URL", ErrInvalidConfig, cfg.WebSearchURL)
	}
	return &webSearch{
		endpoint:  base.JoinPath("html/"),
		region:    cfg.WebSearchRegion,
		userAgent: cfg.WebSearchUserAgent,
		maxBytes:  int64(cfg.WebSearchMaxBytes),
		client:    newSearchClient(cfg, base),
	}, nil
}

func (*webSearch) Spec() Spec {
	return Spec{
		Name: WebSearchName,
		Description: "Search the web (DuckDuckGo) for current information: news, facts you are unsure of, " +
			"places, products, documentation. Returns result titles, URLs and short snippets.",
		Parameters: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"query": map[string]any{
					"type":        "string",
					"description": "The search terms.",
				},
				"limit": map[string]any{
					"type":        "integer",
					"minimum":     1,
					"maximum":     webMaxLimit,
					"description": fmt.Sprintf("Most results to return (default %d).", webDefaultLimit),
				},
			},
			"required":             []any{"query"},
			"additionalProperties": false,
		},
		Source: SourceBuiltin,
	}
}

func (w *webSearch) Call(ctx context.Context, _ Invocation, args map[string]any) (any, error) {
	query, err := stringArg(args, "query")
	if err != nil {
		return nil, err
	}
	limit, err := intArg(args, "limit", webDefaultLimit, 1, webMaxLimit)
	if err != nil {
		return nil, err
	}
	page, err := w.search(ctx, strings.TrimSpace(query), limit)
	if err != nil {
		return nil, err
	}
	results := make([]any, 0, len(page.Results))
	for _, r := range page.Results {
		results = append(results, map[string]any{"title": r.Title, "url": r.URL, "snippet": r.Snippet})
	}
	return map[string]any{"query": query, "results": results}, nil
}

func (w *webSearch) search(ctx context.Context, query string, limit int) (searchPage, error) {
	u := *w.endpoint
	q := url.Values{"q": {query}}
	if w.region != "" {
		q.Set("kl", w.region)
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return searchPage{}, fmt.Errorf("%w: %v", ErrSearchFailed, err)
	}
	req.Header.Set("User-Agent", w.userAgent)
	req.Header.Set("Accept", "text/html,application/xhtml+xml")
	req.Header.Set("Accept-Language", "en-US,en;q=0.8")
	start := time.Now()
	resp, err := w.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return searchPage{}, ctx.Err()
		}
		if errors.Is(err, errRedirectRefused) || errors.Is(err, netguard.ErrRefused) {
			return searchPage{}, fmt.Errorf("%w: DuckDuckGo's redirect was not followed (%w)", ErrSearchFailed, netCause(err))
		}
		return searchPage{}, fmt.Errorf("%w: DuckDuckGo could not be reached (%s)", ErrSearchFailed, shortNetError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		if resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusForbidden {
			return searchPage{}, fmt.Errorf("%w: DuckDuckGo refused the search (HTTP %d); it limits automated searches, try again later", ErrSearchFailed, resp.StatusCode)
		}
		return searchPage{}, fmt.Errorf("%w: DuckDuckGo answered HTTP %d", ErrSearchFailed, resp.StatusCode)
	}
	// A page past the cap is parsed as far as it was read: the results come first.
	page, err := parseSearchPage(io.LimitReader(resp.Body, w.maxBytes), resp.Request.URL, limit)
	if err != nil {
		if ctx.Err() != nil {
			return searchPage{}, ctx.Err()
		}
		return searchPage{}, fmt.Errorf("%w: reading the result page after %s: %v", ErrSearchFailed, time.Since(start).Round(time.Millisecond), err)
	}
	if page.Blocked && len(page.Results) == 0 {
		return searchPage{}, fmt.Errorf("%w: DuckDuckGo asked for a CAPTCHA instead of answering; it limits automated searches, try again later", ErrSearchFailed)
	}
	return page, nil
}

// netCause is a transport error without the URL (which repeats the query).
func netCause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// shortNetError keeps the cause of a transport error without the URL
// (which repeats the query).
func shortNetError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return "timed out"
		}
		return ue.Err.Error()
	}
	return err.Error()
}
