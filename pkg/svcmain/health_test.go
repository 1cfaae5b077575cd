package svcmain_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/pkg/svcmain"
)

func TestHealthcheck(t *testing.T) {
	healthy := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		if !healthy {
			http.Error(w, "nats: not connected", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	}))
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()

	for _, tc := range []struct {
		name    string
		args    []string
		healthy bool
		code    int
		out     string
	}{
		{"healthy", []string{srv.URL + "/healthz"}, true, 0, "ok"},
		{"unhealthy", []string{srv.URL + "/healthz"}, false, svcmain.ExitFailed, "503 Service Unavailable: nats: not connected"},
		{"wrong path", []string{srv.URL + "/nope"}, true, svcmain.ExitFailed, "404"},
		{"nothing listening", []string{closed.URL + "/healthz"}, true, svcmain.ExitFailed, "connection refused"},
		{"no URL", nil, true, svcmain.ExitConfig, "usage"},
		{"not a URL", []string{"127.0.0.1:9090"}, true, svcmain.ExitConfig, "not an http(s) URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			healthy = tc.healthy
			var stdout, stderr bytes.Buffer
			code := svcmain.Healthcheck(tc.args, &stdout, &stderr)
			if code != tc.code || !strings.Contains(stdout.String()+stderr.String(), tc.out) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, stdout.String(), stderr.String(), tc.code, tc.out)
			}
		})
	}
}
