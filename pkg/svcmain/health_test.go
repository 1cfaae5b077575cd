package svcmain_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/svcmain"
)

// TestMain lets the test binary act as a service binary (svcmain.Main) when
// asMain is set, so a test can run it with arguments as a container does.
func TestMain(m *testing.M) {
	if mode := os.Getenv(drainChild); mode != "" { // drain_test.go
		os.Exit(drainService(mode))
	}
	if os.Getenv(asMain) == "1" {
		svcmain.Main("x", func() (config, error) { return config{}, errors.New("started the service instead of probing") },
			func(context.Context, config, zerolog.Logger) error { return nil })
	}
	os.Exit(m.Run())
}

const asMain = "SVCMAIN_TEST_AS_MAIN"

// A service binary given `healthcheck URL` probes instead of starting: what
// the compose file's healthchecks run.
func TestMainHealthcheck(t *testing.T) {
	var healthy atomic.Bool
	healthy.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !healthy.Load() {
			http.Error(w, "postgres: connection refused", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	}))
	defer srv.Close()
	run := func(args ...string) (int, string) {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), asMain+"=1")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	if code, out := run(svcmain.HealthcheckCommand, srv.URL+"/healthz"); code != 0 || strings.TrimSpace(out) != "ok" {
		t.Fatalf("healthy: exit %d, %q", code, out)
	}
	healthy.Store(false)
	if code, out := run(svcmain.HealthcheckCommand, srv.URL+"/healthz"); code != svcmain.ExitFailed || !strings.Contains(out, "postgres: connection refused") {
		t.Fatalf("unhealthy: exit %d, %q", code, out)
	}
	// Without the command the binary starts the service (here: its config fails).
	if code, out := run(); code != svcmain.ExitConfig || !strings.Contains(out, "started the service instead of probing") {
		t.Fatalf("no arguments: exit %d, %q", code, out)
	}
}

func TestHealthcheck(t *testing.T) {
	var healthy atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		if !healthy.Load() {
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
			healthy.Store(tc.healthy)
			var stdout, stderr bytes.Buffer
			code := svcmain.Healthcheck(tc.args, &stdout, &stderr)
			if code != tc.code || !strings.Contains(stdout.String()+stderr.String(), tc.out) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, stdout.String(), stderr.String(), tc.code, tc.out)
			}
		})
	}
}
