package jaeger_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/jaeger"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/jaegertest"
)

// chromium is Debian's package; nothing here downloads a browser.
const chromium = "/usr/bin/chromium"

// TestWriteUI: the embedded viewer is written whole, and replaces what the
// directory held.
func TestWriteUI(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ui")
	if err := os.MkdirAll(filepath.Join(dir, "static"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "static", "old.js"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := jaeger.WriteUI(dir); err != nil {
		t.Fatal(err)
	}
	var want []string
	err := fs.WalkDir(jaeger.UI(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		want = append(want, p)
		b, _ := fs.ReadFile(jaeger.UI(), p)
		got, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s: %d bytes, %v; want the embedded %d bytes", p, len(got), err, len(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(want, " ") != "index.html static/trace-viewer.css static/trace-viewer.js" {
		t.Errorf("embedded files %v", want)
	}
	if _, err := os.Stat(filepath.Join(dir, "static", "old.js")); !os.IsNotExist(err) {
		t.Errorf("a file of the directory's previous content is left: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), ".ui-*"))
	if len(left) != 0 {
		t.Errorf("temporary directories left: %v", left)
	}
}

// TestUIAssets: a directory Options.UIAssets names is served instead of
// the embedded viewer.
func TestUIAssets(t *testing.T) {
	bin := jaegertest.Binary(t)
	assets, dir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(assets, "index.html"), []byte(`<!doctype html><base href="/"><title>another UI</title>`), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := jaeger.Start(context.Background(), jaeger.Options{Bin: bin, Dir: dir, UIAssets: assets})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if page := get(t, s.UIURL+"/", "text/html"); !strings.Contains(page, "another UI") || s.EmbeddedUI || s.UIAssets != assets {
		t.Fatalf("server %+v serves:\n%s", s, page)
	}
	if _, err := os.Stat(filepath.Join(dir, "ui")); !os.IsNotExist(err) {
		t.Fatalf("the embedded viewer was written too: %v", err)
	}
}

// TestUIInBrowser starts Jaeger with the embedded trace viewer, sends it two
// traces over OTLP/HTTP (three nested spans, and an older one of one
// span), and drives the viewer in Debian's chromium with Playwright
// (testdata/ui_browser.mjs): the list, the search by conversation and by
// trace id, the waterfall's rows and nesting, a span's attributes and
// events, the keyboard, deep links, axe-core's accessibility checks. The
// screenshots go to testdata/screenshots.
//
// It needs Node.js, the web client's node_modules (@playwright/test and
// @axe-core/playwright: `task deps` runs npm ci in services/gateway/web)
// and chromium: without them the test is skipped, and fails under CI=true.
func TestUIInBrowser(t *testing.T) {
	web, err := filepath.Abs(filepath.Join("..", "..", "services", "gateway", "web"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		testkit.Missing(t, "node (Node.js) not found: the browser test needs Node 20+")
	}
	for _, p := range []string{"@playwright/test", "@axe-core/playwright"} {
		if _, err := os.Stat(filepath.Join(web, "node_modules", p, "package.json")); err != nil {
			testkit.Missing(t, "%s/node_modules has no %s: run npm ci there (task deps)", web, p)
		}
	}
	if _, err := os.Stat(chromium); err != nil {
		testkit.Missing(t, "%s not found: apt-get install chromium (Debian's package; the test never downloads a browser)", chromium)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "ui_browser.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(script); err != nil { // read: go test's cache then knows the script
		t.Fatal(err)
	}
	bin := jaegertest.Binary(t)

	s, err := jaeger.Start(context.Background(), jaeger.Options{Bin: bin, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if !s.EmbeddedUI || s.UIAssets == "" {
		t.Fatalf("server %+v: want the embedded UI", s)
	}
	// Jaeger serves our index.html for any path outside its API and
	// static/, with its version written in.
	page := get(t, s.UIURL+"/some/deep/path", "text/html")
	if !strings.Contains(page, "<title>Traces · Alicia</title>") || !strings.Contains(page, `JAEGER_VERSION = {"gitCommit"`) {
		t.Fatalf("index.html as Jaeger serves it:\n%s", page)
	}
	get(t, s.UIURL+"/static/trace-viewer.js", "text/javascript")
	get(t, s.UIURL+"/static/trace-viewer.css", "text/css")

	const (
		traceID      = "4bf92f3577b34da6a3ce929d0e0e4736"
		olderID      = "0af7651916cd43dd8448eb211c80319c"
		conversation = "ac_trace_viewer_test"
		rootSpan     = "00f067aa0ba902b7"
		turnSpan     = "b7ad6b7169203331"
		modelSpan    = "53995c3f42cd8ad8"
	)
	ms := func(t0 time.Time, d int) int64 { return t0.Add(time.Duration(d) * time.Millisecond).UnixNano() }
	t0 := time.Now().Add(-2 * time.Second)
	t1 := t0.Add(-time.Minute)
	str := func(k, v string) string { return fmt.Sprintf(`{"key":%q,"value":{"stringValue":%q}}`, k, v) }
	num := func(k string, v int) string { return fmt.Sprintf(`{"key":%q,"value":{"intValue":"%d"}}`, k, v) }
	span := func(trace, id, parent, name string, kind int, start, end int64, extra string, attrs ...string) string {
		return fmt.Sprintf(`{"traceId":%q,"spanId":%q,"parentSpanId":%q,"name":%q,"kind":%d,"startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":[%s]%s}`,
			trace, id, parent, name, kind, start, end, strings.Join(attrs, ","), extra)
	}
	scope := func(name string, spans ...string) string {
		return fmt.Sprintf(`{"scope":{"name":"github.com/alicia-voice/alicia/%s"},"spans":[%s]}`, name, strings.Join(spans, ","))
	}
	// Three services, as alicia up names them: the turn's trace is in two.
	resource := func(service string, scopes ...string) string {
		return `{"resource":{"attributes":[` + str("service.name", service) + `]},"scopeSpans":[` + strings.Join(scopes, ",") + `]}`
	}
	body := `{"resourceSpans":[` + resource("alicia-gateway",
		scope("pkg/edge", span(traceID, rootSpan, "", "edge.receive UserMessage", 2, ms(t0, 0), ms(t0, 420), "",
			str("alicia.conversation_id", conversation), str("alicia.message_type", "UserMessage")))) + "," +
		resource("alicia-llm", scope("services/llm",
			span(traceID, turnSpan, rootSpan, "llm.turn", 1, ms(t0, 12), ms(t0, 400),
				fmt.Sprintf(`,"events":[{"timeUnixNano":"%d","name":"llm.first_token","attributes":[%s]}]`, ms(t0, 180), num("tokens", 1)),
				str("alicia.conversation_id", conversation), str("alicia.turn_id", "am_trace_viewer_answer")),
			span(traceID, modelSpan, turnSpan, "llm.model_request", 3, ms(t0, 30), ms(t0, 390), "",
				str("gen_ai.request.model", "fake-chat"), num("gen_ai.usage.output_tokens", 42)))) + "," +
		resource("alicia-memory", scope("services/memory", span(olderID, "e457b5a2e4d86bd1", "", "memory.search", 2, ms(t1, 0), ms(t1, 35),
			`,"status":{"code":2,"message":"embedding server unreachable"}`, str("alicia.user_id", "alice")))) +
		`]}`
	resp, err := http.Post(s.OTLPHTTPURL+"/v1/traces", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || bytes.Contains(answer, []byte("rejected")) {
		t.Fatalf("OTLP export: %s %s", resp.Status, answer)
	}
	testkit.EventuallyNoError(t, 10*time.Second, func() error {
		for id, n := range map[string]int{traceID: 3, olderID: 1} {
			tr, err := jaegertest.GetTrace(context.Background(), s.UIURL, id)
			if err != nil {
				return err
			}
			if len(tr.Spans) != n {
				return fmt.Errorf("trace %s has %d spans, want %d", id, len(tr.Spans), n)
			}
		}
		return nil
	}, "both traces in Jaeger")

	shots := filepath.Join(filepath.Dir(script), "screenshots")
	if err := os.Remove(filepath.Join(shots, "failure.png")); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Env = append(os.Environ(),
		"UI_URL="+s.UIURL, "TRACE_ID="+traceID, "OLDER_TRACE_ID="+olderID, "CONVERSATION_ID="+conversation,
		"MODEL_SPAN_ID="+modelSpan, "SCREENSHOTS="+shots, "PLAYWRIGHT_DIR="+web,
		"PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1", "FORCE_COLOR=0")
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("node %s:\n%s", filepath.Base(script), out)
	if err != nil {
		t.Fatalf("the browser check failed: %v (its output is above; testdata/screenshots/failure.png shows the page)", err)
	}
}

// get fetches url and checks its status and content type.
func get(t *testing.T, url, contentType string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), contentType) {
		t.Fatalf("GET %s: %s, %s; want 200, %s", url, resp.Status, resp.Header.Get("Content-Type"), contentType)
	}
	return string(b)
}
