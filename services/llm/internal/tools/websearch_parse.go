package tools

import (
	"io"
	"net/url"
	"slices"
	"strings"

	"golang.org/x/net/html"
)

// searchResult is one organic result of a DuckDuckGo HTML page.
type searchResult struct {
	Title   string
	URL     string
	Snippet string
}

// searchPage is what a DuckDuckGo HTML answer holds.
type searchPage struct {
	Results []searchResult
	// Blocked is true for DuckDuckGo's bot check (a CAPTCHA instead of results).
	Blocked bool
}

// parseSearchPage reads DuckDuckGo's HTML results markup: each result is an
// element of class "result" holding an a.result__a (title and link), an
// .result__snippet and an .result__url. Ads (class result--ad) are skipped,
// and links through DuckDuckGo's /l/?uddg= redirect are unwrapped. base
// resolves protocol-relative and relative links.
func parseSearchPage(r io.Reader, base *url.URL, limit int) (searchPage, error) {
	doc, err := html.Parse(r)
	if err != nil {
		return searchPage{}, err
	}
	var page searchPage
	seen := map[string]bool{}
	for n := range doc.Descendants() {
		if n.Type != html.ElementNode {
			continue
		}
		if hasClass(n, "anomaly-modal__modal") || (n.Data == "form" && hasClass(n, "challenge-form")) {
			page.Blocked = true
		}
		if len(page.Results) >= limit || !hasClass(n, "result") || hasClass(n, "result--ad") {
			continue
		}
		link := findClass(n, "result__a")
		if link == nil {
			continue
		}
		target := resultURL(attr(link, "href"), base)
		if target == "" || seen[target] {
			continue
		}
		title := textOf(link)
		if title == "" {
			continue
		}
		seen[target] = true
		res := searchResult{Title: title, URL: target}
		if s := findClass(n, "result__snippet"); s != nil {
			res.Snippet = textOf(s)
		}
		page.Results = append(page.Results, res)
	}
	return page, nil
}

// resultURL turns a result link into the page it points to: the uddg
// parameter of a DuckDuckGo redirect, or the link itself. Ad redirects
// (/y.js) and anything that is not http(s) give "".
func resultURL(href string, base *url.URL) string {
	href = strings.TrimSpace(href)
	if href == "" {
		return ""
	}
	u, err := base.Parse(href)
	if err != nil {
		return ""
	}
	if isDuckDuckGo(u.Host) || u.Host == base.Host {
		switch {
		case strings.HasPrefix(u.Path, "/l/"):
			target := u.Query().Get("uddg")
			if target == "" {
				return ""
			}
			t, err := url.Parse(target)
			if err != nil || (t.Scheme != "http" && t.Scheme != "https") || t.Host == "" {
				return ""
			}
			return t.String()
		case strings.HasPrefix(u.Path, "/y.js"):
			return ""
		}
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	return u.String()
}

func isDuckDuckGo(host string) bool {
	return host == "duckduckgo.com" || strings.HasSuffix(host, ".duckduckgo.com")
}

func hasClass(n *html.Node, class string) bool {
	return slices.Contains(strings.Fields(attr(n, "class")), class)
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// findClass returns the first element below n (n excluded) with class.
func findClass(n *html.Node, class string) *html.Node {
	for d := range n.Descendants() {
		if d.Type == html.ElementNode && hasClass(d, class) {
			return d
		}
	}
	return nil
}

// textOf is n's text with runs of white space collapsed.
func textOf(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		switch {
		case d.Type == html.TextNode:
			b.WriteString(d.Data)
		case d.Type == html.ElementNode && d.Data == "br":
			b.WriteByte(' ')
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}
