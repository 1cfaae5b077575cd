package svcmain

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// HealthcheckCommand is the first argument that makes a service binary
// probe a running instance instead of starting one:
//
//	<binary> healthcheck http://127.0.0.1:9090/healthz
//
// The images carry no curl or wget, so a container's healthcheck runs the
// service's own binary (docker-compose.yml).
const HealthcheckCommand = "healthcheck"

// HealthcheckTimeout bounds one probe; Docker's own healthcheck timeout
// (30 s by default) is then never what ends it.
const HealthcheckTimeout = 5 * time.Second

// Healthcheck GETs the URL in args and returns 0 when it answers 2xx, else
// 1 with the reason (the body of a 503 names the failing checks) on stderr;
// 2 when the arguments are wrong.
func Healthcheck(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintf(stderr, "usage: %s <http://127.0.0.1:port/healthz>\n", HealthcheckCommand)
		return ExitConfig
	}
	u, err := url.Parse(args[0])
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fmt.Fprintf(stderr, "%s: %q is not an http(s) URL\n", HealthcheckCommand, args[0])
		return ExitConfig
	}
	ctx, cancel := context.WithTimeout(context.Background(), HealthcheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", HealthcheckCommand, err)
		return ExitConfig
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "unhealthy: %v\n", err)
		return ExitFailed
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	text := strings.TrimSpace(string(body))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		fmt.Fprintf(stderr, "unhealthy: %s: %s\n", resp.Status, text)
		return ExitFailed
	}
	fmt.Fprintln(stdout, text)
	return 0
}
