package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/testkit"
)

// What BenchmarkWebClient runs (the specs read them from ALICIA_WEB_BENCH_*).
const (
	benchWarmup       = 20   // turns before measuring, in both clients
	benchTurns        = 200  // measured send → first sentence turns, in both clients
	benchMemoryTurns  = 500  // turns through the page while its heap is sampled
	benchColdLoads    = 25   // cold loads of a conversation
	benchLargeTurns   = 1000 // turns of the large conversation: 2,000 messages
	benchSmallTurns   = 3    // turns of the conversation the cold loads open
	benchOpenRepeats  = 7    // opens of the large conversation
	benchWSTextPrefix = "Go client turn"
	// benchPace spaces the turns of both clients: the gateway lets a
	// session send 20 envelopes a second after a burst of 40 (pkg/edge
	// Limits), and a client sending faster waits for it, which is not what
	// is measured here.
	benchPace = 100 * time.Millisecond
)

// BenchmarkWebClient measures the web client's figures of issue 12 against
// one real stack (the one TestBrowser uses): JavaScript on first load, cold
// load to interactive, send → first sentence rendered next to the same turn
// from a plain Go WebSocket client and from a bare WebSocket in the same
// browser, in the same run, and opening, scrolling and running turns
// through a long conversation. The page's figures come from Playwright
// specs (services/gateway/web/bench, config playwright.bench.config.ts) that
// write JSON files this reads; all of them, with their samples, are saved
// in services/gateway/web/bench-results/latest.json. Not a timed test: run
// it alone, on a machine doing nothing else.
//
//	go test -run '^$' -bench WebClient -benchtime 1x -timeout 30m ./services/e2e/web/
func BenchmarkWebClient(b *testing.B) {
	web := webDir(b)
	needBench(b, web)
	start := time.Now()
	s := startStack(b)
	b.Logf("stack up in %s: %s", time.Since(start).Round(time.Millisecond), s.base)

	start = time.Now()
	small := seed(b, s, benchSmallTurns)
	large := seed(b, s, benchLargeTurns)
	waitStored(b, s, large, 2*benchLargeTurns)
	b.Logf("seeded %s (%d messages) and %s (%d messages) in %s", small, 2*benchSmallTurns, large, 2*benchLargeTurns,
		time.Since(start).Round(time.Millisecond))

	b.ResetTimer()
	for range b.N {
		waitQuiet(b, s, 5*time.Minute)
		loadBefore := loadAverage()
		b.Logf("measuring; load average %s", loadBefore)
		// The baseline: a Go client on the same stack, just before the page.
		ws := openWS(b, s.base, aliceKey)
		lat := make([]time.Duration, 0, benchTurns)
		next := time.Now()
		for i := range benchWarmup + benchTurns {
			time.Sleep(time.Until(next)) // the pacing, not a wait for a condition
			next = time.Now().Add(benchPace)
			if i < benchWarmup {
				ws.turn(fmt.Sprintf("%s %d (warm-up)", benchWSTextPrefix, i))
				continue
			}
			lat = append(lat, ws.turn(fmt.Sprintf("%s %d", benchWSTextPrefix, i-benchWarmup)))
		}

		out := b.TempDir()
		runBenchSpecs(b, web, s, "playwright.bench.config.ts", out,
			"ALICIA_WEB_BENCH_SMALL="+small,
			"ALICIA_WEB_BENCH_LARGE="+large,
			"ALICIA_WEB_BENCH_WARMUP="+strconv.Itoa(benchWarmup),
			"ALICIA_WEB_BENCH_TURNS="+strconv.Itoa(benchTurns),
			"ALICIA_WEB_BENCH_PACE_MS="+strconv.Itoa(int(benchPace.Milliseconds())),
			"ALICIA_WEB_BENCH_MEMORY_TURNS="+strconv.Itoa(benchMemoryTurns),
			"ALICIA_WEB_BENCH_COLD_LOADS="+strconv.Itoa(benchColdLoads),
			"ALICIA_WEB_BENCH_OPENS="+strconv.Itoa(benchOpenRepeats),
		)

		loadAfter := loadAverage()
		b.Logf("measured; load average %s", loadAfter)
		metrics, detail := readResults(b, out)
		metrics["ws-first-sentence-max-ms"] = quantileMS(lat, 1)
		samples := make([]float64, len(lat))
		for i, d := range lat {
			samples[i] = float64(d.Microseconds()) / 1000
		}
		detail["ws"], _ = json.Marshal(map[string]any{"turns": len(lat), "samplesMs": samples})
		detail["host"], _ = json.Marshal(map[string]any{"loadAverageBefore": loadBefore, "loadAverageAfter": loadAfter})
		ws50, ws99 := quantileMS(lat, 0.50), quantileMS(lat, 0.99)
		metrics["ws-first-sentence-p50-ms"] = ws50
		metrics["ws-first-sentence-p99-ms"] = ws99
		if p, ok := metrics["page-first-sentence-p50-ms"]; ok {
			metrics["page-adds-p50-ms"] = p - ws50
		}
		if p, ok := metrics["page-first-sentence-p99-ms"]; ok {
			metrics["page-adds-p99-ms"] = p - ws99
		}
		// What the app adds over a bare WebSocket in the same browser.
		if p, ok := metrics["page-first-sentence-p50-ms"]; ok {
			if bare, ok := metrics["browser-ws-first-sentence-p50-ms"]; ok {
				metrics["page-adds-over-browser-ws-p50-ms"] = p - bare
			}
		}
		// And over the least any page must do (minimal page, same browser).
		if p, ok := metrics["page-first-sentence-p50-ms"]; ok {
			if least, ok := metrics["minimal-page-first-sentence-p50-ms"]; ok {
				metrics["page-adds-over-minimal-page-p50-ms"] = p - least
			}
		}
		b.StopTimer()
		report(b, metrics, detail, filepath.Join(web, "bench-results", "latest.json"))
		b.StartTimer()
	}
}

// runBenchSpecs runs `npx playwright test --config config` in web against
// the stack; the specs write their results into out.
func runBenchSpecs(b *testing.B, web string, s *stack, config, out string, env ...string) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npx", append([]string{"--no-install", "playwright", "test", "--config", config},
		strings.Fields(os.Getenv("ALICIA_WEB_PLAYWRIGHT_ARGS"))...)...)
	cmd.Dir = web
	cmd.Env = append(os.Environ(),
		"ALICIA_WEB_BASE_URL="+s.base,
		"ALICIA_WEB_ALICE_KEY="+aliceKey,
		"ALICIA_WEB_BENCH_OUT="+out,
		"PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1",
		"FORCE_COLOR=0",
	)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		b.Fatalf("npx playwright test --config %s: %v (its output is above)", config, err)
	}
}

// needBench checks what the benchmark needs besides the stack (missing: a
// skip, a failure under CI=true).
func needBench(b *testing.B, web string) {
	b.Helper()
	if _, err := exec.LookPath("npx"); err != nil {
		testkit.Missing(b, "npx (Node.js) not found: the web benchmark needs Node 20+")
	}
	if _, err := os.Stat(filepath.Join(web, "node_modules", "@playwright", "test", "package.json")); err != nil {
		testkit.Missing(b, "%s/node_modules has no @playwright/test: run npm ci there", web)
	}
	if _, err := os.Stat(chromium); err != nil {
		testkit.Missing(b, "%s not found: apt-get install chromium (Debian's package; nothing downloads a browser)", chromium)
	}
	if _, err := os.Stat(filepath.Join(web, "dist", "assets")); err != nil {
		testkit.Missing(b, "%s/dist holds no build of the web client: run npm run build there", web)
	}
}

// seed makes a conversation of turns turns (2×turns messages) through the
// gateway's WebSocket: the llm answers each message with the fake model,
// and persistence stores what the services publish. Past a burst, the
// gateway paces the connection to 20 envelopes a second (pkg/edge Limits),
// which also lets the memory service's extraction of each turn keep up.
func seed(b testing.TB, s *stack, turns int) string {
	b.Helper()
	w := openWS(b, s.base, aliceKey)
	for i := range turns {
		w.turn(seedText(i))
	}
	_ = w.c.CloseNow()
	return w.cid
}

// waitStored waits until persistence has stored n completed messages of
// cid, as GET /v1/conversations/{id} shows them.
func waitStored(b testing.TB, s *stack, cid string, n int) {
	b.Helper()
	testkit.EventuallyNoError(b, 60*time.Second, func() error {
		req, err := http.NewRequest(http.MethodGet, s.base+"/v1/conversations/"+cid, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+aliceKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		var c struct {
			Messages []struct {
				Status string `json:"status"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(body, &c); err != nil {
			return fmt.Errorf("%d %.200s: %w", resp.StatusCode, body, err)
		}
		done := 0
		for _, m := range c.Messages {
			if m.Status == "completed" {
				done++
			}
		}
		if len(c.Messages) != n || done != n {
			return fmt.Errorf("%d messages stored, %d completed, want %d", len(c.Messages), done, n)
		}
		return nil
	}, "the seeded conversation stored")
}

// benchResult is what a spec writes: figures named with their unit
// ("cold-load-p50-ms") and the samples behind them.
type benchResult struct {
	Metrics map[string]float64 `json:"metrics"`
	Detail  json.RawMessage    `json:"detail"`
}

// readResults reads every spec's result file in dir and returns all the
// figures and, by spec, the samples behind them.
func readResults(b *testing.B, dir string) (map[string]float64, map[string]json.RawMessage) {
	b.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		b.Fatal(err)
	}
	if len(files) == 0 {
		b.Fatalf("the bench specs wrote no result in %s", dir)
	}
	metrics, detail := map[string]float64{}, map[string]json.RawMessage{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		var r benchResult
		if err := json.Unmarshal(data, &r); err != nil {
			b.Fatalf("%s: %v", f, err)
		}
		for k, v := range r.Metrics {
			metrics[k] = v
		}
		detail[strings.TrimSuffix(filepath.Base(f), ".json")] = r.Detail
	}
	return metrics, detail
}

// report gives every figure to the benchmark's output, prints a readable
// table, and saves the figures and their samples in path.
func report(b *testing.B, metrics map[string]float64, detail map[string]json.RawMessage, path string) {
	names := make([]string, 0, len(metrics))
	for k := range metrics {
		names = append(names, k)
	}
	sort.Strings(names)
	var table strings.Builder
	for _, k := range names {
		b.ReportMetric(metrics[k], k)
		fmt.Fprintf(&table, "  %-36s %10.2f\n", k, metrics[k])
	}
	b.ReportMetric(0, "ns/op")
	// b.Log output of a benchmark is cut short: the table goes to stderr.
	fmt.Fprintf(os.Stderr, "web client figures:\n%s", table.String())
	data, err := json.MarshalIndent(map[string]any{"metrics": metrics, "detail": detail}, "", " ")
	if err == nil {
		err = os.MkdirAll(filepath.Dir(path), 0o755)
	}
	if err == nil {
		err = os.WriteFile(path, data, 0o644)
	}
	if err != nil {
		b.Errorf("saving the figures: %v", err)
		return
	}
	fmt.Fprintf(os.Stderr, "figures and samples saved in %s\n", path)
}

// quantileMS is the q-quantile of lat in milliseconds (nearest rank).
func quantileMS(lat []time.Duration, q float64) float64 {
	s := slices.Clone(lat)
	slices.Sort(s)
	i := min(len(s)-1, max(0, int(math.Ceil(q*float64(len(s))))-1))
	return float64(s[i].Microseconds()) / 1000
}

// loadAverage is the host's 1, 5 and 15 minute load averages and its CPU
// count: the figures are only comparable on a machine doing nothing else.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return fmt.Sprintf("%s %s %s on %d CPUs", f[0], f[1], f[2], runtime.NumCPU())
}
