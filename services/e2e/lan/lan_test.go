// Package lan holds the test of Alicia reached from another host of a
// LAN: two network namespaces joined by a veth pair, made by the test
// itself (nothing outside them is addressed). `alicia up` runs in the "box"
// namespace (the package's own, pkg/testkit/netns) with fake models;
// Chromium runs in the "laptop" namespace, made here, trusting only the CA
// that up generated.
package lan

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/devtools"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/localpg"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/netns"
	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
	"github.com/alicia-voice/alicia/pkg/testkit/uptest"
	"github.com/alicia-voice/alicia/pkg/testkit/voiceclient"
)

func TestMain(m *testing.M) { netns.Main(m) }

// What the person says, and the answer; keep in step with e2e-lan/lan.spec.ts.
const (
	question = "What is the weather like in Paris tomorrow?"
	answer   = "Tomorrow in Paris will be mostly sunny. The morning starts cool, around twelve degrees."
	wavRate  = 48000
)

// laptop is the second host: a network namespace holding the veth pair's
// peer end (netns.PeerIP), so that the box (netns.IP) and it reach each
// other only over the pair.
type laptop struct{ name string }

func newLaptop(t *testing.T) laptop {
	t.Helper()
	l := laptop{name: fmt.Sprintf("alicia-laptop-%d", os.Getpid())}
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	ip("netns", "add", l.name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", l.name).Run() })
	ip("link", "set", "alicia1", "netns", l.name)
	ip("-n", l.name, "link", "set", "lo", "up")
	ip("-n", l.name, "addr", "add", netns.PeerIP()+"/24", "dev", "alicia1")
	ip("-n", l.name, "link", "set", "alicia1", "up")
	return l
}

// webDir is services/gateway/web.
func webDir(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "gateway", "web")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@playwright", "test", "package.json")); err != nil {
		testkit.Missing(t, "%s/node_modules has no @playwright/test: the test task's deps step runs npm ci there", dir)
	}
	return dir
}

// TestLANVoice: see the package documentation. The laptop opens the HTTPS
// URL up printed (page loads timed), signs in, holds a voice turn with a
// fake microphone (its media cross the veth pair: the laptop has no other
// way to the box) and finds the app installable; the same page over plain
// HTTP shows why voice cannot start. The same voice turn from the box's own
// loopback, in the same run, is the figure to compare with.
func TestLANVoice(t *testing.T) {
	netns.Require(t)
	devtools.Need(t, devtools.LiveKit)
	web := webDir(t)
	for _, cmd := range []string{"espeak-ng", "certutil", "npx"} {
		if _, err := exec.LookPath(cmd); err != nil {
			testkit.Missing(t, "%s is not installed: the test task's deps step installs it (Debian's espeak-ng and libnss3-tools; Node.js)", cmd)
		}
	}
	lap := newLaptop(t)

	// The fake microphone: lead silence, the question, silence.
	q := voiceclient.SpeechAt(t, question, wavRate)
	pcm := append(make([]int16, 4*wavRate), q...)
	pcm = append(pcm, make([]int16, 30*wavRate)...)
	wav := filepath.Join(t.TempDir(), "question.wav")
	if err := os.WriteFile(wav, audio.EncodeWAV(pcm, wavRate), 0o644); err != nil {
		t.Fatal(err)
	}
	questionLen := audio.FramesDuration(len(q), wavRate)

	// Fake models on the box's loopback.
	model := fakeopenai.New(t, fakeopenai.WithFallback(fakeopenai.Text(answer)))
	speech := fakeopenai.New(t, fakeopenai.WithModels("fake-whisper", "fake-kokoro"))
	speech.SetTranscriber(func(r fakeopenai.TranscriptionRequest) fakeopenai.Transcript {
		if r.Duration >= questionLen*8/10 {
			return fakeopenai.Transcript{Text: question}
		}
		return fakeopenai.Transcript{Text: "What is the weather"}
	})

	bin := uptest.Build(t)
	pgURL := pgtest.NewURL(t)
	t.Cleanup(func() {
		if err := localpg.DropRoles(context.Background(), pgURL); err != nil {
			t.Errorf("drop roles: %v", err)
		}
	})
	_, port, _ := strings.Cut(testkit.FreeAddr(t), ":")
	httpPort, _ := strconv.Atoi(port)
	up := uptest.Start(t, bin, append(uptest.UserEnv(nil),
		"ALICIA_POSTGRES_URL="+pgURL,
		"ALICIA_DATA_DIR="+filepath.Join(t.TempDir(), "fresh"),
		"ALICIA_NATS_URL=nats://"+testkit.FreeAddr(t),
		// Plain HTTP on every address of the box, the LAN's included: the
		// page there must say why voice cannot start.
		"ALICIA_HTTP_ADDR=0.0.0.0:"+strconv.Itoa(httpPort),
		"ALICIA_LLM_URL="+model.URL(), "ALICIA_LLM_MODEL=fake-chat",
		"ALICIA_ASR_URL="+speech.URL(), "ALICIA_ASR_MODEL=fake-whisper",
		"ALICIA_TTS_URL="+speech.URL(), "ALICIA_TTS_ENGINE=openai", "ALICIA_TTS_MODEL=fake-kokoro",
		"ALICIA_EMBEDDING_URL=",
	), "up")
	toHTTPS := up.HTTPSAfter
	banner := up.Out.String()
	httpsURL, key, caFile := uptest.Field(banner, "HTTPS:"), uptest.Field(banner, "API key:"), uptest.Field(banner, "CA:")
	if want := "https://" + netns.IP() + ":8443"; httpsURL != want {
		t.Fatalf("HTTPS URL %q, want the box's LAN address %s:\n%s", httpsURL, want, banner)
	}
	if !strings.Contains(uptest.Field(banner, "LiveKit:"), netns.IP()) {
		t.Fatalf("LiveKit's node IP is not the LAN address:\n%s", banner)
	}
	t.Logf("alicia up on a fresh data directory (CA and certificate made): its HTTPS URL printed, with the whole stack up, after %s", toHTTPS.Round(time.Millisecond))

	// The laptop's browser trusts up's CA, and nothing else of ours.
	home := t.TempDir()
	nssdb := "sql:" + filepath.Join(home, ".pki", "nssdb")
	if err := os.MkdirAll(filepath.Join(home, ".pki", "nssdb"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"-N", "-d", nssdb, "--empty-password"}, {"-A", "-d", nssdb, "-t", "C,,", "-n", "alicia-up", "-i", caFile}} {
		if o, err := exec.Command("certutil", args...).CombinedOutput(); err != nil {
			t.Fatalf("certutil %v: %v: %s", args, err, o)
		}
	}
	screenshots := filepath.Join(web, "screenshots")
	lanFigures := filepath.Join(t.TempDir(), "lan.json")
	runPlaywright(t, web, []string{"ip", "netns", "exec", lap.name}, home,
		"ALICIA_WEB_BASE_URL="+httpsURL,
		"ALICIA_WEB_HTTP_URL=http://"+netns.IP()+":"+strconv.Itoa(httpPort),
		"ALICIA_WEB_KEY="+key, "ALICIA_WEB_FAKE_MIC="+wav, "ALICIA_WEB_QUESTION_MS="+ms(questionLen), "ALICIA_WEB_FIGURES="+lanFigures, "ALICIA_WEB_SCREENSHOTS="+screenshots)

	// The same voice turn from the box itself, over loopback.
	loopFigures := filepath.Join(t.TempDir(), "loopback.json")
	runPlaywright(t, web, nil, t.TempDir(),
		"ALICIA_WEB_BASE_URL=http://127.0.0.1:"+strconv.Itoa(httpPort),
		"ALICIA_WEB_KEY="+key, "ALICIA_WEB_FAKE_MIC="+wav, "ALICIA_WEB_QUESTION_MS="+ms(questionLen), "ALICIA_WEB_FIGURES="+loopFigures)

	var lanFig, loopFig struct {
		PageLoadMs struct {
			P50     float64   `json:"p50"`
			Samples []float64 `json:"samples"`
		} `json:"pageLoadMs"`
		EndOfSpeechToFirstAudioMs float64 `json:"endOfSpeechToFirstAudioMs"`
		Installable               bool    `json:"installable"`
	}
	readJSON(t, lanFigures, &lanFig)
	readJSON(t, loopFigures, &loopFig)
	if !lanFig.Installable || lanFig.EndOfSpeechToFirstAudioMs <= 0 || loopFig.EndOfSpeechToFirstAudioMs <= 0 || lanFig.PageLoadMs.P50 <= 0 {
		t.Fatalf("figures missing: LAN %+v, loopback %+v", lanFig, loopFig)
	}
	t.Logf("from the laptop over HTTPS: page load p50 %.0f ms (samples %v); end of speech → first answer audio heard %.0f ms; over the box's loopback in the same run: %.0f ms",
		lanFig.PageLoadMs.P50, lanFig.PageLoadMs.Samples, lanFig.EndOfSpeechToFirstAudioMs, loopFig.EndOfSpeechToFirstAudioMs)
	up.Stop(t)
}

// runPlaywright runs the LAN specs, prefixed by wrap (ip netns exec …) to
// run them on the laptop, with HOME (the browser's NSS database) and env.
func runPlaywright(t *testing.T, web string, wrap []string, home string, env ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	args := append(append([]string{}, wrap...), "npx", "--no-install", "playwright", "test", "--config", "playwright.lan.config.ts")
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = web
	cmd.Env = append(os.Environ(), append([]string{"HOME=" + home, "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1", "FORCE_COLOR=0"}, env...)...)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("playwright (%s):\n%s", strings.Join(wrap, " "), out)
	if err != nil {
		t.Fatalf("playwright %v: %v", wrap, err)
	}
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("figures: %v", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("figures %s: %v", path, err)
	}
}
