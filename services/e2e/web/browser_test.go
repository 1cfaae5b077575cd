// Package web_test runs the web client's browser tests
// (services/gateway/web/e2e, Playwright driving Debian's chromium) against
// the real stack in this process: gateway, NATS, Postgres, persistence, llm
// and memory, with pkg/fakeopenai as the only fake.
package web_test

import (
	"bufio"
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/testkit"
)

// chromium is Debian's package; nothing here downloads a browser.
const chromium = "/usr/bin/chromium"

// TestBrowser starts one stack for every spec and runs `npx playwright test`
// in services/gateway/web. The gateway serves the web client it embeds: the
// committed build in web/dist (npm run build rewrites it).
func TestBrowser(t *testing.T) {
	web := webDir(t)
	need(t, web)
	s := startStack(t, judged)
	runPlaywright(t, web, s, "playwright.config.ts")
}

// runPlaywright runs `npx playwright test --config config` in web against
// the stack, with a control server and the specs' environment (plus env).
func runPlaywright(t *testing.T, web string, s *stack, config string, env ...string) {
	start := time.Now()
	control := startControl(t, s)
	t.Logf("stack up: %s (control %s)", s.base, control)

	screenshots := filepath.Join(web, "screenshots")
	ctx, cancel := context.WithTimeout(context.Background(), playwrightTimeout(t))
	defer cancel()
	// ALICIA_WEB_PLAYWRIGHT_ARGS picks specs or tests while working on them,
	// e.g. "e2e/chat.spec.ts" or "--grep reconnect".
	args := append([]string{"--no-install", "playwright", "test", "--config", config}, strings.Fields(os.Getenv("ALICIA_WEB_PLAYWRIGHT_ARGS"))...)
	cmd := exec.CommandContext(ctx, "npx", args...)
	cmd.Dir = web
	cmd.Env = append(os.Environ(),
		"ALICIA_WEB_BASE_URL="+s.base,
		"ALICIA_WEB_CONTROL_URL="+control,
		"ALICIA_WEB_ALICE_KEY="+aliceKey,
		"ALICIA_WEB_BOB_KEY="+bobKey,
		"ALICIA_WEB_CAROL_KEY="+carolKey,
		"ALICIA_WEB_MCP_URL="+s.mcpURL,
		"ALICIA_WEB_SCREENSHOTS="+screenshots,
		"PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1",
		"FORCE_COLOR=0",
	)
	cmd.Env = append(cmd.Env, env...)
	lines := &lineLogger{t: t}
	cmd.Stdout = lines
	cmd.Stderr = cmd.Stdout
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	lines.flush()
	t.Logf("playwright ran in %s", time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("npx playwright test --config %s: %v (its output is above)", config, err)
	}
}

// webDir is services/gateway/web, found from this file's directory.
func webDir(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test's source file")
	}
	dir := filepath.Join(filepath.Dir(file), "..", "..", "gateway", "web")
	if _, err := os.Stat(filepath.Join(dir, "package.json")); err != nil {
		t.Fatalf("web client not found: %v", err)
	}
	return dir
}

// need checks what the browser tests need besides the stack (missing: a
// skip, a failure under CI=true) and reads the specs, so that `go test`
// caches a pass only until a spec or the Playwright config changes.
func need(t *testing.T, web string) {
	t.Helper()
	if _, err := exec.LookPath("npx"); err != nil {
		testkit.Missing(t, "npx (Node.js) not found: the browser tests need Node 20+")
	}
	if _, err := os.Stat(filepath.Join(web, "node_modules", "@playwright", "test", "package.json")); err != nil {
		testkit.Missing(t, "%s/node_modules has no @playwright/test: run npm ci there", web)
	}
	if _, err := os.Stat(filepath.Join(web, "node_modules", "@axe-core", "playwright", "package.json")); err != nil {
		testkit.Missing(t, "%s/node_modules has no @axe-core/playwright: run npm ci there", web)
	}
	if _, err := os.Stat(chromium); err != nil {
		testkit.Missing(t, "%s not found: apt-get install chromium (Debian's package; the tests never download a browser)", chromium)
	}
	// The gateway embeds web/dist: the placeholder has no assets.
	if _, err := os.Stat(filepath.Join(web, "dist", "assets")); err != nil {
		testkit.Missing(t, "%s/dist holds no build of the web client: run npm run build there", web)
	}
	inputs := []string{filepath.Join(web, "playwright.config.ts"), filepath.Join(web, "playwright.voice.config.ts")}
	for _, dir := range []string{"e2e", "e2e-voice"} {
		_ = filepath.WalkDir(filepath.Join(web, dir), func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				inputs = append(inputs, path)
			}
			return nil
		})
	}
	for _, f := range inputs {
		if _, err := os.ReadFile(f); err != nil {
			t.Fatalf("browser tests: %v", err)
		}
	}
}

// playwrightTimeout leaves the test a minute to stop the stack before its
// deadline.
func playwrightTimeout(t *testing.T) time.Duration {
	if d, ok := t.Deadline(); ok {
		return max(time.Until(d)-time.Minute, time.Minute)
	}
	return 15 * time.Minute
}

// lineLogger logs Playwright's output line by line as it comes (go test -v
// shows the progress).
type lineLogger struct {
	t   *testing.T
	mu  sync.Mutex
	buf []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.t.Log(strings.TrimRight(string(l.buf[:i]), "\r"))
		l.buf = l.buf[i+1:]
	}
}

func (l *lineLogger) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	sc := bufio.NewScanner(bytes.NewReader(l.buf))
	for sc.Scan() {
		l.t.Log(sc.Text())
	}
	l.buf = nil
}
