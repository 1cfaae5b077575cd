package compose_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/deploy/checks/compose"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// The compose file's own entrypoint scripts, run with /bin/sh on this
// machine: the container's programs are stand-ins on PATH (or in place of
// their paths), the container's addresses the test's.

// service is a service of the repository's compose file.
func service(t *testing.T, name string) *compose.Service {
	t.Helper()
	f, err := compose.Load(filepath.Join(repoRoot(t), "docker-compose.yml"), composeEnv)
	if err != nil {
		t.Fatal(err)
	}
	s := f.Services[name]
	if s == nil {
		t.Fatalf("no service %s", name)
	}
	return s
}

// shellCommand is the argv of s's [/bin/sh -c <script> <$0>] entrypoint
// followed by its command, the script's words replaced by paths.
func shellCommand(t *testing.T, s *compose.Service, paths *strings.Replacer) []string {
	t.Helper()
	ep := s.Entrypoint
	if len(ep) < 3 || ep[0] != "/bin/sh" || ep[1] != "-c" {
		t.Fatalf("%s entrypoint %q: want [/bin/sh -c <script> …]", s.Name, ep)
	}
	argv := append([]string{"/bin/sh", "-c", paths.Replace(ep[2])}, ep[3:]...)
	return append(argv, s.Command...)
}

// stub writes an executable shell script.
func stub(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func needCurl(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("curl"); err != nil {
		testkit.Missing(t, "curl is not installed (the vLLM and speaches images have it): the test task's deps step installs it")
	}
}

// TestMigrateEntrypoint: the migrate job runs `alicia migrate up` again,
// every MIGRATE_DELAY seconds, while it fails (the first connections to a
// database that just became ready can still be refused), and gives up
// after MIGRATE_ATTEMPTS.
func TestMigrateEntrypoint(t *testing.T) {
	s := service(t, "migrate")
	for _, tc := range []struct {
		name      string
		succeedAt int // the attempt that succeeds; 0: none
		attempts  string
		wantRuns  int
		wantExit  int
	}{
		{"the database answers at the third attempt", 3, "30", 3, 0},
		{"it never does", 0, "4", 4, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			runs := filepath.Join(dir, "runs")
			bin := filepath.Join(dir, "service")
			succeed := "false"
			if tc.succeedAt > 0 {
				succeed = fmt.Sprintf(`[ "$(wc -l < %s)" -ge %d ]`, runs, tc.succeedAt)
			}
			stub(t, bin, `echo "$*" >> `+runs+"\n"+succeed)
			argv := shellCommand(t, s, strings.NewReplacer("/usr/local/bin/service", bin))
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "MIGRATE_DELAY=0", "MIGRATE_ATTEMPTS=" + tc.attempts}
			out, err := cmd.CombinedOutput()
			if code := cmd.ProcessState.ExitCode(); code != tc.wantExit {
				t.Fatalf("exit %d (%v), want %d; output:\n%s", code, err, tc.wantExit, out)
			}
			b, _ := os.ReadFile(runs)
			got := strings.Split(strings.TrimSpace(string(b)), "\n")
			if len(got) != tc.wantRuns || slices.ContainsFunc(got, func(l string) bool { return l != strings.Join(s.Command, " ") }) {
				t.Fatalf("the binary ran with %q; want %d runs of %q", got, tc.wantRuns, strings.Join(s.Command, " "))
			}
			if tc.wantExit != 0 && !strings.Contains(string(out), "giving up") {
				t.Fatalf("output %q: want it to say it gave up", out)
			}
		})
	}
}

// healthAfter answers /health with 503 until n requests have come, then 200.
func healthAfter(n int32) (*httptest.Server, *atomic.Int32) {
	var calls atomic.Int32
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) < n {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})), &calls
}

// TestGPUWaitEntrypoint: a vLLM service's entrypoint starts the server (the
// image's `vllm serve` with the service's flags) only once the GPU service
// before it (GPU_AFTER) answers its health URL, or GPU_WAIT seconds passed,
// saying so; the first GPU service starts at once.
func TestGPUWaitEntrypoint(t *testing.T) {
	needCurl(t)
	s := service(t, "embeddings")
	healthy, calls := healthAfter(2)
	defer healthy.Close()
	never, _ := healthAfter(1 << 30)
	defer never.Close()
	for _, tc := range []struct {
		name, after, wait string
		wantPolls         int32 // at least
		wantSay           string
	}{
		{"the first GPU service", "", "900", 0, ""},
		{"after the one before it is healthy", healthy.URL + "/health", "900", 2, ""},
		{"the one before it never is", never.URL + "/health", "0", 0, "still not healthy after 0s: starting anyway"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := filepath.Join(dir, "args")
			stub(t, filepath.Join(dir, "vllm"), `echo "$@" > `+args)
			argv := shellCommand(t, s, strings.NewReplacer())
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = []string{"PATH=" + dir + ":" + os.Getenv("PATH"), "GPU_AFTER=" + tc.after, "GPU_WAIT=" + tc.wait}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			b, err := os.ReadFile(args)
			if want := "serve " + strings.Join(s.Command, " "); err != nil || strings.TrimSpace(string(b)) != want {
				t.Fatalf("vllm ran with %q (%v); want %q", b, err, want)
			}
			if tc.wantPolls > 0 && calls.Load() < tc.wantPolls {
				t.Fatalf("%d health requests before the start; want %d", calls.Load(), tc.wantPolls)
			}
			if !strings.Contains(string(out), tc.wantSay) {
				t.Fatalf("output %q; want %q", out, tc.wantSay)
			}
		})
	}
}

// fakeSpeaches answers speaches' /health, loads the models it knows on
// POST /api/ps/<model> (201) and lists them on GET /api/ps.
type fakeSpeaches struct {
	known  []string
	mu     sync.Mutex
	loaded []string
}

func (f *fakeSpeaches) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.URL.Path == "/health":
	case r.URL.Path == "/api/ps" && r.Method == http.MethodGet:
		b, _ := json.Marshal(map[string][]string{"models": f.loaded})
		_, _ = w.Write(b)
	case strings.HasPrefix(r.URL.Path, "/api/ps/") && r.Method == http.MethodPost:
		m := strings.TrimPrefix(r.URL.Path, "/api/ps/")
		if !slices.Contains(f.known, m) {
			http.Error(w, `{"detail":"Model '`+m+`' is not installed locally."}`, http.StatusNotFound)
			return
		}
		f.loaded = append(f.loaded, m)
		w.WriteHeader(http.StatusCreated)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeSpeaches) loadedModels() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.loaded)
}

// TestSpeachesEntrypoint: speaches' entrypoint starts the server
// (uvicorn), loads every model of LOAD_MODELS once it answers, and stays
// until the server ends, passing SIGTERM on to it; a model it cannot load
// (its weights not downloaded) or a server that dies first stops the
// container with the reason. Its healthcheck is healthy only once every
// model of LOAD_MODELS is loaded.
func TestSpeachesEntrypoint(t *testing.T) {
	needCurl(t)
	s := service(t, "speaches")
	models := strings.Fields(s.Environment["LOAD_MODELS"])
	for _, tc := range []struct {
		name     string
		known    []string
		uvicorn  string // the stand-in server process
		wantExit int    // -1: keeps running until SIGTERM
		wantSay  string
	}{
		{"every model loaded", models, "exec sleep 300", -1, ""},
		{"a model not downloaded", models[:1], "exec sleep 300", 1, "run --rm download-speaches"},
		{"the server dies", models, "exit 3", 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &fakeSpeaches{known: tc.known}
			var handler http.Handler = fake
			if tc.uvicorn == "exit 3" { // a server that never answers
				handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
			}
			srv := httptest.NewServer(handler)
			defer srv.Close()
			dir := t.TempDir()
			stub(t, filepath.Join(dir, "uvicorn"), tc.uvicorn)
			paths := strings.NewReplacer("http://127.0.0.1:8000", srv.URL, "/tmp/", dir+"/")
			argv := shellCommand(t, s, paths)
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = []string{"PATH=" + dir + ":" + os.Getenv("PATH"), "GPU_AFTER=", "GPU_WAIT=900", "LOAD_MODELS=" + s.Environment["LOAD_MODELS"]}
			var out testkit.SyncBuffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			defer func() { _ = cmd.Process.Kill() }()

			if tc.wantExit >= 0 {
				select {
				case <-done:
				case <-time.After(30 * time.Second):
					t.Fatalf("still running; output:\n%s", out.String())
				}
				if code := cmd.ProcessState.ExitCode(); code != tc.wantExit || !strings.Contains(out.String(), tc.wantSay) {
					t.Fatalf("exit %d, output %q; want exit %d saying %q", code, out.String(), tc.wantExit, tc.wantSay)
				}
				return
			}
			testkit.Eventually(t, 30*time.Second, func() bool { return len(fake.loadedModels()) == len(models) }, "the models loaded; output: %s", &out)
			if healthy := runHealthcheck(t, s, paths, dir); !healthy {
				t.Error("the healthcheck fails with every model loaded")
			}
			fake.mu.Lock()
			fake.loaded = fake.loaded[:1]
			fake.mu.Unlock()
			if runHealthcheck(t, s, paths, dir) {
				t.Error("the healthcheck passes with a model not loaded")
			}
			select {
			case err := <-done:
				t.Fatalf("exited (%v) while the server runs; output:\n%s", err, out.String())
			case <-time.After(200 * time.Millisecond):
			}
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("SIGTERM did not stop it; output:\n%s", out.String())
			}
		})
	}
}

// runHealthcheck runs s's CMD-SHELL healthcheck with paths replaced and
// reports whether it passed.
func runHealthcheck(t *testing.T, s *compose.Service, paths *strings.Replacer, dir string) bool {
	t.Helper()
	test := s.Healthcheck.Test
	if len(test) != 2 || test[0] != "CMD-SHELL" {
		t.Fatalf("%s healthcheck %q: want [CMD-SHELL <script>]", s.Name, test)
	}
	cmd := exec.Command("/bin/sh", "-c", paths.Replace(test[1]))
	cmd.Env = []string{"PATH=" + dir + ":" + os.Getenv("PATH"), "LOAD_MODELS=" + s.Environment["LOAD_MODELS"]}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	return cmd.Run() == nil
}
