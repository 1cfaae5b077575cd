package compose_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/deploy/checks/compose"
	"github.com/alicia-voice/alicia/pkg/svcmain"
	"github.com/alicia-voice/alicia/services/asr"
	"github.com/alicia-voice/alicia/services/cli/deploycmd"
	"github.com/alicia-voice/alicia/services/gateway"
	"github.com/alicia-voice/alicia/services/llm"
	"github.com/alicia-voice/alicia/services/memory"
	"github.com/alicia-voice/alicia/services/persistence"
	roomagent "github.com/alicia-voice/alicia/services/room-agent"
	"github.com/alicia-voice/alicia/services/tts"
)

// loaders are the services' own configuration loaders, by the SERVICE
// build arg of their image: what a service reads is found by their effect.
var loaders = map[string]func() (any, error){
	"gateway":     func() (any, error) { c, err := gateway.ConfigFromEnv(); return c, err },
	"llm":         func() (any, error) { c, err := llm.ConfigFromEnv(); return c, err },
	"asr":         func() (any, error) { c, err := asr.ConfigFromEnv(); return c, err },
	"tts":         func() (any, error) { c, err := tts.ConfigFromEnv(); return c, err },
	"memory":      func() (any, error) { c, err := memory.ConfigFromEnv(); return c, err },
	"persistence": func() (any, error) { c, err := persistence.ConfigFromEnv(); return c, err },
	"room-agent":  func() (any, error) { c, err := roomagent.ConfigFromEnv(); return c, err },
}

// mainPackage is the package the image of SERVICE is built from (deploy/Dockerfile).
func mainPackage(service string) string {
	if service == "cli" {
		return "./services/cli/cmd/alicia"
	}
	return "./services/" + service + "/cmd/" + service
}

// ExampleNodeIP is an address of the documentation range (RFC 5737): the
// compose file needs one to interpolate.
const exampleNodeIP = "192.0.2.10"

// composeEnv is the environment the compose file is read with.
var composeEnv = map[string]string{"ALICIA_LIVEKIT_NODE_IP": exampleNodeIP}

func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := compose.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// repo is what the checks know about this repository, built once.
type repo struct {
	root       string
	secretsDir string // secret files made by init-secrets, standing in for /run/secrets
	cli        string // the alicia binary

	mu     sync.Mutex
	static map[string]map[string]bool
}

var (
	repoOnce sync.Once
	theRepo  *repo
	repoErr  error
)

func loadRepo(t *testing.T) *repo {
	t.Helper()
	repoOnce.Do(func() {
		root := repoRoot(t)
		tmp, err := os.MkdirTemp("", "composecheck-")
		if err != nil {
			repoErr = err
			return
		}
		r := &repo{root: root, secretsDir: filepath.Join(tmp, "secrets"), static: map[string]map[string]bool{}}
		if err := deploycmd.InitSecrets(deploycmd.Options{Dir: r.secretsDir, Out: io.Discard}); err != nil {
			repoErr = err
			return
		}
		r.cli = filepath.Join(tmp, "alicia")
		build := compose.GoCommand(context.Background(), root, "build", "-o", r.cli, "./services/cli/cmd/alicia")
		if out, err := build.CombinedOutput(); err != nil {
			repoErr = fmt.Errorf("go build alicia: %v\n%s", err, out)
			return
		}
		theRepo = r
	})
	if repoErr != nil {
		t.Fatal(repoErr)
	}
	return theRepo
}

func (r *repo) file(t *testing.T) *compose.File {
	t.Helper()
	f, err := compose.Load(filepath.Join(r.root, "docker-compose.yml"), composeEnv)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// contract builds the checks' knowledge of the repository.
func (r *repo) contract(t *testing.T) compose.Contract {
	t.Helper()
	dockerfile, err := os.ReadFile(filepath.Join(r.root, "deploy", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	// Images only: a FROM naming an earlier stage is no image.
	var froms, stages []string
	for _, m := range regexp.MustCompile(`(?m)^FROM\s+(\S+)(?:\s+AS\s+(\S+))?`).FindAllStringSubmatch(string(dockerfile), -1) {
		if !slices.Contains(stages, m[1]) {
			froms = append(froms, m[1])
		}
		if m[2] != "" {
			stages = append(stages, m[2])
		}
	}
	entry := regexp.MustCompile(`(?m)^ENTRYPOINT \["([^"]+)"\]`).FindStringSubmatch(string(dockerfile))
	if entry == nil {
		t.Fatal("deploy/Dockerfile has no ENTRYPOINT [\"…\"]")
	}
	return compose.Contract{
		Dockerfile:         "deploy/Dockerfile",
		Binary:             entry[1],
		HealthcheckCommand: svcmain.HealthcheckCommand,
		DockerfileFrom:     froms,
		Reads:              func(service string, env map[string]string) (map[string]bool, error) { return r.reads(t, service, env) },
		CLI:                r.usage,
		MustBeHealthy:      []string{"nats", "postgres"},
		SecretsDir:         "./deploy/secrets",
		SecretNames:        deploycmd.SecretNames,
		Images:             compose.Images,
		UpBeforeModels:     []string{"gateway"},
		GPUAfterVar:        "GPU_AFTER",
		MetricsAddrVar:     metricsAddrVar,
		Scrape:             r.scrape(t),
	}
}

// metricsAddrVar is the variable holding the address each binary serves
// /metrics on: a metrics address of its own (the gateway's too,
// ALICIA_GATEWAY_METRICS_ADDR; without it the gateway serves /metrics
// beside its API).
func metricsAddrVar(service string) string {
	if service == "cli" {
		return ""
	}
	return "ALICIA_" + strings.ToUpper(strings.ReplaceAll(service, "-", "_")) + "_METRICS_ADDR"
}

// scrape is deploy/prometheus/prometheus.yml's scrape jobs.
func (r *repo) scrape(t *testing.T) []compose.ScrapeJob {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.root, "deploy", "prometheus", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := compose.ParseScrape(b)
	if err != nil {
		t.Fatalf("deploy/prometheus/prometheus.yml: %v", err)
	}
	return jobs
}

// reads returns the variables the binary of service reads among those env
// sets: what its source names (compose.SourceReads), and what changes
// its configuration (ConfigFromEnv) when the value changes.
func (r *repo) reads(t *testing.T, service string, env map[string]string) (map[string]bool, error) {
	r.mu.Lock()
	static, ok := r.static[service]
	r.mu.Unlock()
	if !ok {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var err error
		if static, err = compose.SourceReads(ctx, r.root, mainPackage(service)); err != nil {
			return nil, err
		}
		r.mu.Lock()
		r.static[service] = static
		r.mu.Unlock()
	}
	reads := map[string]bool{}
	for k := range static {
		reads[k] = true
	}
	load := loaders[service]
	if load == nil {
		return reads, nil
	}
	base, err := r.loadWith(t, load, env, "", "")
	if err != nil {
		return nil, fmt.Errorf("ConfigFromEnv with the compose environment: %w", err)
	}
	// Fields made afresh at each load (a random instance token) differ
	// whatever the environment says: they are left out of the comparison.
	again, err := r.loadWith(t, load, env, "", "")
	if err != nil {
		return nil, fmt.Errorf("ConfigFromEnv with the compose environment: %w", err)
	}
	stable := stableFields(base, again)
	for name, v := range env {
		if reads[name] {
			continue
		}
		changed, err := r.loadWith(t, load, env, name, v+"-changed")
		if err != nil || !reflect.DeepEqual(stable(base), stable(changed)) {
			reads[name] = true
		}
	}
	return reads, nil
}

// stableFields returns what keeps of a configuration (a struct) only the
// top-level fields that a and b, two loads of the same environment, agree
// on.
func stableFields(a, b any) func(any) any {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Kind() != reflect.Struct || va.Type() != vb.Type() {
		return func(c any) any { return c }
	}
	var unstable []int
	for i := range va.NumField() {
		if va.Type().Field(i).IsExported() && !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			unstable = append(unstable, i)
		}
	}
	return func(c any) any {
		v := reflect.New(reflect.TypeOf(c)).Elem()
		v.Set(reflect.ValueOf(c))
		for _, i := range unstable {
			v.Field(i).Set(reflect.Zero(v.Field(i).Type()))
		}
		return v.Interface()
	}
}

// loadWith runs load with exactly env set (the secret files redirected to
// init-secrets' output), name set to value when name is not empty.
func (r *repo) loadWith(t *testing.T, load func() (any, error), env map[string]string, name, value string) (any, error) {
	t.Helper()
	set := map[string]string{}
	for k, v := range env {
		set[k] = v
	}
	if name != "" {
		set[name] = value
	}
	for k, v := range set {
		if p, ok := strings.CutPrefix(v, "/run/secrets/"); ok && strings.HasSuffix(k, "_FILE") {
			v = filepath.Join(r.secretsDir, p)
			if k == name { // a changed secret: the same file with other content
				b, err := os.ReadFile(filepath.Join(r.secretsDir, strings.TrimSuffix(p, "-changed")))
				if err != nil {
					return nil, err
				}
				v = filepath.Join(t.TempDir(), "changed")
				if err := os.WriteFile(v, append([]byte("changed"), b...), 0o600); err != nil {
					return nil, err
				}
			}
		}
		set[k] = v
	}
	clearAliciaEnv(t)
	for k, v := range set {
		os.Setenv(k, v)
	}
	defer func() {
		for k := range set {
			os.Unsetenv(k)
		}
	}()
	return load()
}

// clearAliciaEnv unsets the test process's ALICIA_* and Go runtime
// variables (restored when the test ends), so only what the compose file
// sets is seen.
func clearAliciaEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "ALICIA_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
}

var usageLine = regexp.MustCompile(`(?m)^Usage:\n\s+alicia((?: [a-z][a-z0-9-]*)*)`)
var flagName = regexp.MustCompile(`--[a-z][a-z0-9-]*`)

// usage runs `alicia <args> --help` and reads the command path and flags
// it printed.
func (r *repo) usage(args []string) ([]string, map[string]bool, error) {
	var words []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			break
		}
		words = append(words, a)
	}
	cmd := exec.Command(r.cli, append(words, "--help")...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir()}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, nil, fmt.Errorf("%v: %s", err, out)
	}
	m := usageLine.FindSubmatch(out)
	if m == nil {
		return nil, nil, fmt.Errorf("no usage line in:\n%s", out)
	}
	flags := map[string]bool{}
	if _, after, ok := bytes.Cut(out, []byte("Flags:")); ok {
		for _, f := range flagName.FindAll(after, -1) {
			flags[string(f)] = true
		}
	}
	return strings.Fields(string(m[1])), flags, nil
}

// TestComposeFile: the repository's docker-compose.yml keeps its contract.
func TestComposeFile(t *testing.T) {
	r := loadRepo(t)
	f := r.file(t)
	c := r.contract(t)
	for _, p := range compose.Check(f, c) {
		t.Error(p)
	}
	// Every image built from the Dockerfile is one whose variables the test knows.
	for _, s := range f.BuiltFrom("deploy/Dockerfile") {
		svc := s.Build.Args["SERVICE"]
		if _, ok := loaders[svc]; !ok && svc != "cli" {
			t.Errorf("%s: SERVICE=%s has no ConfigFromEnv in loaders", s.Name, svc)
		}
	}
}

// TestRoomAgentImageHasTheVAD: the compose room-agent builds the
// Dockerfile's room-agent stage, which copies the neural VAD's model and
// runtime from the npm packages of deploy/vad to where the service looks
// first; the other services build the default stage, without them.
func TestRoomAgentImageHasTheVAD(t *testing.T) {
	r := loadRepo(t)
	f := r.file(t)
	dockerfile, err := os.ReadFile(filepath.Join(r.root, "deploy", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	df := string(dockerfile)
	stages := regexp.MustCompile(`(?m)^FROM\s+\S+\s+AS\s+(\S+)`).FindAllStringSubmatch(df, -1)
	if last := stages[len(stages)-1][1]; last == "room-agent" {
		t.Fatal("the room-agent stage is the Dockerfile's default target: every image would carry the VAD runtime")
	}
	for _, s := range f.BuiltFrom("deploy/Dockerfile") {
		want := ""
		if s.Build.Args["SERVICE"] == "room-agent" {
			want = "room-agent"
		}
		if s.Build.Target != want {
			t.Errorf("%s builds target %q, want %q", s.Name, s.Build.Target, want)
		}
	}
	stage := df[strings.Index(df, "AS room-agent"):]
	if !strings.Contains(stage, "COPY --from=vad /out/ "+roomagent.VADImageDir+"/") {
		t.Fatalf("the room-agent stage does not copy the VAD runtime to %s:\n%s", roomagent.VADImageDir, stage)
	}
	vadStage := df[strings.Index(df, "AS vad"):]
	for _, want := range []string{"COPY deploy/vad/package.json deploy/vad/package-lock.json", "npm ci --ignore-scripts",
		"libonnxruntime.so.1", "silero_vad_v5.onnx"} {
		if !strings.Contains(vadStage, want) {
			t.Fatalf("the vad stage lacks %q", want)
		}
	}
}

// TestServiceConfigs: with exactly the compose environment (and the secret
// files init-secrets writes), each service's configuration is valid and
// nothing in it still points at loopback, where a container reaches only
// itself (the models' defaults are 127.0.0.1:8000).
func TestServiceConfigs(t *testing.T) {
	r := loadRepo(t)
	f := r.file(t)
	seen := map[string]bool{}
	for _, s := range f.BuiltFrom("deploy/Dockerfile") {
		svc := s.Build.Args["SERVICE"]
		load := loaders[svc]
		if load == nil || seen[svc] {
			continue
		}
		seen[svc] = true
		t.Run(s.Name, func(t *testing.T) {
			cfg, err := r.loadWith(t, load, s.Environment, "", "")
			if err != nil {
				t.Fatalf("ConfigFromEnv: %v", err)
			}
			for _, p := range loopbacks(reflect.ValueOf(cfg), "Config") {
				t.Errorf("%s points at loopback: set its variable in docker-compose.yml", p)
			}
		})
	}
	if len(seen) != len(loaders) {
		t.Errorf("services in the compose file: %v; want every one of %d", seen, len(loaders))
	}
}

// loopbacks returns the fields under v holding a loopback URL or address.
func loopbacks(v reflect.Value, path string) []string {
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return loopbacks(v.Elem(), path)
	case reflect.Struct:
		var out []string
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				out = append(out, loopbacks(v.Field(i), path+"."+v.Type().Field(i).Name)...)
			}
		}
		return out
	case reflect.Slice, reflect.Array:
		var out []string
		for i := range v.Len() {
			out = append(out, loopbacks(v.Index(i), fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	case reflect.Map:
		var out []string
		for _, k := range v.MapKeys() {
			out = append(out, loopbacks(v.MapIndex(k), fmt.Sprintf("%s[%v]", path, k))...)
		}
		sort.Strings(out)
		return out
	case reflect.String:
		s := v.String()
		h := s
		if i := strings.Index(s, "://"); i >= 0 {
			h = s[i+3:]
			h, _, _ = strings.Cut(h, "/")
		}
		if host, _, err := net.SplitHostPort(h); err == nil {
			h = host
		}
		if ip := net.ParseIP(h); (ip != nil && ip.IsLoopback()) || h == "localhost" {
			return []string{path + " = " + s}
		}
	}
	return nil
}

// Each rule fails on a broken copy of the file: the checks are not vacuous.
func TestChecksCatch(t *testing.T) {
	r := loadRepo(t)
	c := r.contract(t)
	for _, tc := range []struct {
		name    string
		break_  func(f *compose.File, c *compose.Contract)
		service string
		rule    string
		detail  string
	}{
		{"a variable nobody reads", func(f *compose.File, _ *compose.Contract) {
			f.Services["asr"].Environment["ALICIA_ASR_BOGUS"] = "1"
		}, "asr", compose.RuleEnv, "ALICIA_ASR_BOGUS is given but never read"},
		{"the model URLs given to every service", func(f *compose.File, _ *compose.Contract) {
			f.Services["persistence"].Environment["ALICIA_LLM_URL"] = "http://vllm:8000/v1"
		}, "persistence", compose.RuleEnv, "ALICIA_LLM_URL is given but never read"},
		{"a variable only another service reads", func(f *compose.File, _ *compose.Contract) {
			f.Services["gateway"].Environment["ALICIA_ASR_CONCURRENCY"] = "8"
		}, "gateway", compose.RuleEnv, "ALICIA_ASR_CONCURRENCY"},
		{"a _FILE variable the service does not read", func(f *compose.File, _ *compose.Contract) {
			f.Services["asr"].Environment["ALICIA_LLM_API_KEY_FILE"] = "/run/secrets/nats_password_asr"
		}, "asr", compose.RuleEnv, "ALICIA_LLM_API_KEY_FILE is given but never read"},
		{"a third-party variable the image ignores", func(f *compose.File, _ *compose.Contract) {
			f.Services["speaches"].Environment["WHISPER__MODEL"] = "large-v3"
		}, "speaches", compose.RuleEnv, "WHISPER__MODEL"},
		{"a reader of the schema not waiting for migrate", func(f *compose.File, _ *compose.Contract) {
			delete(f.Services["llm"].DependsOn, "migrate")
		}, "llm", compose.RuleDepends, "reaches migrate but does not depend on it"},
		{"migrate waited for as started", func(f *compose.File, _ *compose.Contract) {
			f.Services["memory"].DependsOn["migrate"] = compose.Dependency{Condition: compose.Started}
		}, "memory", compose.RuleDepends, "migrate is a job"},
		{"nats only started", func(f *compose.File, _ *compose.Contract) {
			f.Services["tts"].DependsOn["nats"] = compose.Dependency{Condition: compose.Started}
		}, "tts", compose.RuleDepends, "nats must be service_healthy"},
		{"a model server not waited for", func(f *compose.File, _ *compose.Contract) {
			delete(f.Services["asr"].DependsOn, "speaches")
		}, "asr", compose.RuleDepends, "reaches speaches"},
		{"livekit not waited for", func(f *compose.File, _ *compose.Contract) {
			delete(f.Services["room-agent"].DependsOn, "livekit")
		}, "room-agent", compose.RuleDepends, "reaches livekit"},
		{"healthy without a healthcheck", func(f *compose.File, _ *compose.Contract) {
			f.Services["vllm"].Healthcheck = nil
		}, "llm", compose.RuleDepends, "vllm has no healthcheck"},
		{"a dependency that is no service", func(f *compose.File, _ *compose.Contract) {
			f.Services["llm"].DependsOn["vlm"] = compose.Dependency{Condition: compose.Healthy}
		}, "llm", compose.RuleDepends, "vlm, which is not a service"},
		{"a major.minor tag", func(f *compose.File, _ *compose.Contract) {
			f.Services["nats"].Image = "nats:2.12-alpine"
		}, "nats", compose.RuleImage, "nats:2.12-alpine floats"},
		{"latest", func(f *compose.File, _ *compose.Contract) {
			f.Services["speaches"].Image = "ghcr.io/speaches-ai/speaches:latest-cuda"
		}, "speaches", compose.RuleImage, "floats"},
		{"an image whose flags nobody checked", func(f *compose.File, _ *compose.Contract) {
			f.Services["vllm"].Image = "vllm/vllm-openai:v0.13.0"
		}, "vllm", compose.RuleImage, "not among the known images"},
		{"a floating base image", func(_ *compose.File, c *compose.Contract) {
			c.DockerfileFrom = append(c.DockerfileFrom, "debian:bookworm-slim")
		}, "", compose.RuleImage, "FROM debian:bookworm-slim floats"},
		{"a flag vLLM dropped", func(f *compose.File, _ *compose.Contract) {
			f.Services["embeddings"].Command = compose.Words{"--model", "BAAI/bge-m3", "--task", "embed"}
		}, "embeddings", compose.RuleCommand, "unknown flag --task"},
		{"a value vLLM does not take", func(f *compose.File, _ *compose.Contract) {
			f.Services["embeddings"].Command = compose.Words{"--model", "BAAI/bge-m3", "--runner", "embed"}
		}, "embeddings", compose.RuleCommand, "--runner embed is not one of"},
		{"a flag livekit-server does not have", func(f *compose.File, _ *compose.Contract) {
			ep := f.Services["livekit"].Entrypoint
			ep[len(ep)-1] = strings.Replace(ep[len(ep)-1], "--config", "--conf", 1)
		}, "livekit", compose.RuleCommand, "unknown flag --conf"},
		{"livekit-server not run", func(f *compose.File, _ *compose.Contract) {
			f.Services["livekit"].Entrypoint = compose.Words{"/bin/sh", "-c", "exec /bin/livekit --config /etc/livekit.yaml"}
		}, "livekit", compose.RuleCommand, "does not run /livekit-server"},
		{"no such alicia command", func(f *compose.File, _ *compose.Contract) {
			f.Services["migrate"].Command = compose.Words{"migrate", "upp"}
		}, "migrate", compose.RuleCommand, "alicia migrate upp is not a command"},
		{"no such alicia flag", func(f *compose.File, _ *compose.Contract) {
			f.Services["init-secrets"].Command = compose.Words{"deploy", "init-secrets", "--directory", "/secrets"}
		}, "init-secrets", compose.RuleCommand, "has no flag --directory"},
		{"arguments to a service binary", func(f *compose.File, _ *compose.Contract) {
			f.Services["gateway"].Command = compose.Words{"--addr", ":8080"}
		}, "gateway", compose.RuleCommand, "takes no arguments"},
		{"a secret file not mounted", func(f *compose.File, _ *compose.Contract) {
			f.Services["llm"].Secrets = nil
		}, "llm", compose.RuleSecrets, "ALICIA_POSTGRES_URL_FILE names /run/secrets/postgres_reader_url, which is not mounted"},
		{"a secret mounted for nothing", func(f *compose.File, _ *compose.Contract) {
			f.Services["asr"].Secrets = []compose.SecretRef{{Source: "api_keys"}}
		}, "asr", compose.RuleSecrets, "api_keys is mounted at /run/secrets/api_keys but nothing there reads it"},
		{"a secret the script reads not mounted", func(f *compose.File, _ *compose.Contract) {
			f.Services["livekit"].Secrets = f.Services["livekit"].Secrets[:1]
		}, "livekit", compose.RuleSecrets, "/run/secrets/livekit_api_secret, which is not mounted"},
		{"a secret init-secrets does not write", func(f *compose.File, _ *compose.Contract) {
			f.Secrets["redis_password"] = compose.Secret{File: "./deploy/secrets/redis_password"}
			f.Services["gateway"].Secrets = append(f.Services["gateway"].Secrets, compose.SecretRef{Source: "redis_password"})
		}, "", compose.RuleSecrets, "redis_password is not one init-secrets writes"},
		{"a secret outside deploy/secrets", func(f *compose.File, _ *compose.Contract) {
			f.Secrets["api_keys"] = compose.Secret{File: "./api_keys"}
		}, "", compose.RuleSecrets, "api_keys is read from ./api_keys"},
		{"no healthcheck", func(f *compose.File, _ *compose.Contract) {
			f.Services["tts"].Healthcheck = nil
		}, "tts", compose.RuleHealth, "without a healthcheck"},
		{"a healthcheck of a port the service does not serve", func(f *compose.File, _ *compose.Contract) {
			f.Services["asr"].Healthcheck = &compose.Healthcheck{Test: compose.Words{"CMD", "/usr/local/bin/service", "healthcheck", "http://127.0.0.1:9091/healthz"}}
		}, "asr", compose.RuleHealth, "port 9091"},
		{"curl in an image without it", func(f *compose.File, _ *compose.Contract) {
			f.Services["memory"].Healthcheck = &compose.Healthcheck{Test: compose.Words{"CMD", "curl", "-f", "http://127.0.0.1:9090/healthz"}}
		}, "memory", compose.RuleHealth, "want [CMD /usr/local/bin/service healthcheck <url>]"},
		{"a tool the third-party image lacks", func(f *compose.File, _ *compose.Contract) {
			f.Services["speaches"].Healthcheck = &compose.Healthcheck{Test: compose.Words{"CMD", "wget", "-q", "http://127.0.0.1:8000/health"}}
		}, "speaches", compose.RuleHealth, `runs "wget"`},
		{"one model cache for vLLM and speaches", func(f *compose.File, _ *compose.Contract) {
			f.Services["speaches"].Volumes = []compose.Volume{{Type: "volume", Source: "vllm-cache", Target: "/home/ubuntu/.cache/huggingface/hub"}}
		}, "", compose.RuleVolumes, "volume vllm-cache is shared by"},
		{"a log that is not rotated", func(f *compose.File, _ *compose.Contract) {
			f.Services["speaches"].Logging = nil
		}, "speaches", compose.RuleLogging, "grows without bound"},
		{"json-file without a size limit", func(f *compose.File, _ *compose.Contract) {
			f.Services["migrate"].Logging = &compose.Logging{Driver: "json-file", Options: map[string]string{"max-file": "5"}}
		}, "migrate", compose.RuleLogging, "set max-size and max-file"},
		{"a log driver that does not rotate here", func(f *compose.File, _ *compose.Contract) {
			f.Services["nats"].Logging = &compose.Logging{Driver: "syslog"}
		}, "nats", compose.RuleLogging, `driver "syslog"`},
		{"a metrics port published", func(f *compose.File, _ *compose.Contract) {
			f.Services["asr"].Ports = []string{"9090:9090"}
		}, "asr", compose.RuleMetrics, "port 9090, where it serves /metrics (ALICIA_ASR_METRICS_ADDR), is published on every address"},
		{"a metrics port published on a LAN address", func(f *compose.File, _ *compose.Contract) {
			f.Services["tts"].Ports = []string{"192.168.1.20:9090:9090"}
		}, "tts", compose.RuleMetrics, "published on 192.168.1.20"},
		{"the gateway's metrics port published", func(f *compose.File, _ *compose.Contract) {
			f.Services["gateway"].Ports = append(slices.Clone(f.Services["gateway"].Ports), "9090:9090")
		}, "gateway", compose.RuleMetrics, "port 9090, where it serves /metrics (ALICIA_GATEWAY_METRICS_ADDR)"},
		{"one replica scraped, whichever DNS answers", func(_ *compose.File, c *compose.Contract) {
			c.Scrape = slices.Clone(c.Scrape)
			for i, j := range c.Scrape {
				if j.Name == "alicia-asr" {
					c.Scrape[i] = compose.ScrapeJob{Name: j.Name, Static: []string{"asr:9090"}}
				}
			}
		}, "asr", compose.RuleScrape, "static target asr:9090"},
		{"SRV records, which Docker's DNS does not serve", func(_ *compose.File, c *compose.Contract) {
			c.Scrape = slices.Clone(c.Scrape)
			for i, j := range c.Scrape {
				if j.Name == "alicia-llm" {
					c.Scrape[i] = compose.ScrapeJob{Name: j.Name, DNS: []compose.DNSSD{{Names: []string{"llm"}, Type: "SRV"}}}
				}
			}
		}, "llm", compose.RuleScrape, "SRV records"},
		{"a service nobody scrapes", func(_ *compose.File, c *compose.Contract) {
			c.Scrape = slices.DeleteFunc(slices.Clone(c.Scrape), func(j compose.ScrapeJob) bool { return j.Name == "alicia-room-agent" })
		}, "room-agent", compose.RuleScrape, "no scrape job finds it"},
		{"a scrape of the wrong port", func(f *compose.File, _ *compose.Contract) {
			f.Services["memory"].Environment["ALICIA_MEMORY_METRICS_ADDR"] = "0.0.0.0:9100"
			f.Services["memory"].Healthcheck.Test[3] = "http://127.0.0.1:9100/healthz"
		}, "memory", compose.RuleScrape, "scrapes port 9090; /metrics is on 9100"},
		{"the gateway waiting for a model server", func(f *compose.File, _ *compose.Contract) {
			f.Services["gateway"].DependsOn["embeddings"] = compose.Dependency{Condition: compose.Started}
		}, "gateway", compose.RuleStartOrder, "waits for the model server embeddings (gateway → embeddings)"},
		{"the gateway waiting for a model server through another service", func(f *compose.File, _ *compose.Contract) {
			f.Services["persistence"].DependsOn["vllm"] = compose.Dependency{Condition: compose.Started}
		}, "gateway", compose.RuleStartOrder, "gateway → persistence → vllm"},
		{"two GPU services starting together", func(f *compose.File, _ *compose.Contract) {
			f.Services["speaches"].Environment["GPU_AFTER"] = ""
		}, "", compose.RuleStartOrder, "GPU services that wait for none"},
		{"two GPU services waiting for the same one", func(f *compose.File, _ *compose.Contract) {
			f.Services["speaches"].Environment["GPU_AFTER"] = "http://vllm:8000/health"
			f.Services["speaches"].DependsOn["vllm"] = compose.Dependency{Condition: compose.Healthy}
		}, "", compose.RuleStartOrder, "[embeddings speaches] all start once vllm is healthy"},
		{"a GPU wait compose does not know of", func(f *compose.File, _ *compose.Contract) {
			delete(f.Services["speaches"].DependsOn, "embeddings")
		}, "speaches", compose.RuleStartOrder, "waits for embeddings at start but not in depends_on"},
		{"a GPU wait on a URL the healthcheck does not ask", func(f *compose.File, _ *compose.Contract) {
			f.Services["embeddings"].Environment["GPU_AFTER"] = "http://vllm:8000/v1/models"
		}, "embeddings", compose.RuleStartOrder, "is not what vllm's healthcheck asks"},
		{"a GPU entrypoint that does not wait", func(f *compose.File, _ *compose.Contract) {
			f.Services["embeddings"].Entrypoint = compose.Words{"/bin/sh", "-c", `exec vllm serve "$@"`, "vllm"}
		}, "embeddings", compose.RuleStartOrder, "does not wait for $GPU_AFTER"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := r.file(t)
			cc := c
			cc.DockerfileFrom = append([]string(nil), c.DockerfileFrom...)
			tc.break_(f, &cc)
			var got []string
			found := false
			for _, p := range compose.Check(f, cc) {
				got = append(got, p.String())
				if p.Service == tc.service && p.Rule == tc.rule && strings.Contains(p.Detail, tc.detail) {
					found = true
				}
			}
			if !found {
				t.Fatalf("no %s problem of %q with %q; got:\n%s", tc.rule, tc.service, tc.detail, strings.Join(got, "\n"))
			}
		})
	}
}

// TestNodeIPRequired: without ALICIA_LIVEKIT_NODE_IP the file does not
// load (LiveKit would advertise an address the room-agent cannot reach).
func TestNodeIPRequired(t *testing.T) {
	r := loadRepo(t)
	_, err := compose.Load(filepath.Join(r.root, "docker-compose.yml"), map[string]string{})
	if err == nil || !strings.Contains(err.Error(), "ALICIA_LIVEKIT_NODE_IP") {
		t.Fatalf("loaded without ALICIA_LIVEKIT_NODE_IP: %v", err)
	}
}

// TestPostgresRoles: each service logs in to Postgres as its role (least
// privilege, deploy/README.md): persistence as the writer, the gateway, llm
// and memory as the reader, only the migrate job and the backup job as the
// superuser (with the roles' URLs, to make them); no other service mounts a
// Postgres secret.
func TestPostgresRoles(t *testing.T) {
	f := loadRepo(t).file(t)
	want := map[string]map[string]string{
		"persistence": {"ALICIA_POSTGRES_URL_FILE": deploycmd.PostgresWriterURL},
		"gateway":     {"ALICIA_POSTGRES_URL_FILE": deploycmd.PostgresReaderURL},
		"llm":         {"ALICIA_POSTGRES_URL_FILE": deploycmd.PostgresReaderURL},
		"memory":      {"ALICIA_POSTGRES_URL_FILE": deploycmd.PostgresReaderURL},
		"asr":         {"ALICIA_POSTGRES_URL_FILE": deploycmd.PostgresReaderURL},
		"tts":         {"ALICIA_POSTGRES_URL_FILE": deploycmd.PostgresReaderURL},
		"room-agent":  {"ALICIA_POSTGRES_URL_FILE": deploycmd.PostgresReaderURL},
		"migrate": {
			"ALICIA_POSTGRES_URL_FILE":          deploycmd.PostgresURL,
			"ALICIA_POSTGRES_MIGRATOR_URL_FILE": deploycmd.PostgresMigratorURL,
			"ALICIA_POSTGRES_WRITER_URL_FILE":   deploycmd.PostgresWriterURL,
			"ALICIA_POSTGRES_READER_URL_FILE":   deploycmd.PostgresReaderURL,
		},
		// A restore makes the roles and loads rows as they were, as the superuser.
		"backup": {
			"ALICIA_POSTGRES_URL_FILE":          deploycmd.PostgresURL,
			"ALICIA_POSTGRES_MIGRATOR_URL_FILE": deploycmd.PostgresMigratorURL,
			"ALICIA_POSTGRES_WRITER_URL_FILE":   deploycmd.PostgresWriterURL,
			"ALICIA_POSTGRES_READER_URL_FILE":   deploycmd.PostgresReaderURL,
		},
		"postgres": {
			"POSTGRES_PASSWORD_FILE":              deploycmd.PostgresPassword,
			deploycmd.PostgresMigratorPasswordVar: deploycmd.PostgresMigratorPassword,
			deploycmd.PostgresWriterPasswordVar:   deploycmd.PostgresWriterPassword,
			deploycmd.PostgresReaderPasswordVar:   deploycmd.PostgresReaderPassword,
		},
	}
	for _, s := range f.Sorted() {
		got := map[string]string{}
		for _, r := range s.Secrets {
			if strings.HasPrefix(r.Source, "postgres_") {
				got[r.Source] = ""
			}
		}
		for name, v := range s.Environment {
			if secret, ok := strings.CutPrefix(v, "/run/secrets/postgres_"); ok {
				got["postgres_"+secret] = name
			}
		}
		wantSecrets := map[string]string{}
		for name, secret := range want[s.Name] {
			wantSecrets[secret] = name
		}
		if !reflect.DeepEqual(got, wantSecrets) {
			t.Errorf("%s: Postgres secrets (secret → variable) %v; want %v", s.Name, got, wantSecrets)
		}
	}
	if pg := f.Services["postgres"]; pg == nil || !slices.ContainsFunc(pg.Volumes, func(v compose.Volume) bool {
		return v.Source == "./"+deploycmd.PostgresInitFile && strings.HasPrefix(v.Target, "/docker-entrypoint-initdb.d/")
	}) {
		t.Errorf("postgres does not run %s from /docker-entrypoint-initdb.d", deploycmd.PostgresInitFile)
	}
}

// TestComposeClusterProfile: with the cluster profile's environment
// (deploy/nats/, docker-compose.yml's header of x-base-env), the file keeps
// its contract, every long-running Alicia service is given the three nodes
// and ALICIA_STREAM_REPLICAS=3 and waits for each node to be healthy; the
// nodes run only in the cluster profile, with deploy/nats/cluster.conf and
// a volume each. Without that environment the services stay on the single
// server at R1.
func TestComposeClusterProfile(t *testing.T) {
	const urls = "nats://nats-1:4222,nats://nats-2:4222,nats://nats-3:4222"
	r := loadRepo(t)
	env := map[string]string{"ALICIA_NATS_URL": urls, "ALICIA_STREAM_REPLICAS": "3"}
	for k, v := range composeEnv {
		env[k] = v
	}
	f, err := compose.Load(filepath.Join(r.root, "docker-compose.yml"), env)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range compose.Check(f, r.contract(t)) {
		t.Error(p)
	}
	nodes := []string{"nats-1", "nats-2", "nats-3"}
	for _, name := range nodes {
		s := f.Services[name]
		if s == nil {
			t.Fatalf("no service %s", name)
		}
		if !slices.Equal(s.Profiles, []string{"cluster"}) || s.Healthcheck == nil {
			t.Errorf("%s: profiles %v, healthcheck %v: want only the cluster profile, with a healthcheck", name, s.Profiles, s.Healthcheck != nil)
		}
		var conf, data bool
		for _, v := range s.Volumes {
			conf = conf || (v.Source == "./deploy/nats/cluster.conf" && v.Target == "/etc/nats/cluster.conf")
			data = data || (v.Source == name+"-data" && v.Target == "/data")
		}
		if !conf || !data {
			t.Errorf("%s: volumes %+v: want deploy/nats/cluster.conf and its own %s-data at /data", name, s.Volumes, name)
		}
	}
	single, err := compose.Load(filepath.Join(r.root, "docker-compose.yml"), composeEnv)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, s := range f.BuiltFrom("deploy/Dockerfile") {
		if s.OneShot() || s.Environment["ALICIA_NATS_URL"] == "" {
			continue
		}
		checked++
		if got := s.Environment["ALICIA_NATS_URL"]; got != urls {
			t.Errorf("%s: ALICIA_NATS_URL %q, want %q", s.Name, got, urls)
		}
		if got := s.Environment["ALICIA_STREAM_REPLICAS"]; got != "3" {
			t.Errorf("%s: ALICIA_STREAM_REPLICAS %q, want 3", s.Name, got)
		}
		for _, n := range nodes {
			if d, ok := s.DependsOn[n]; !ok || d.Condition != compose.Healthy {
				t.Errorf("%s: depends on %s %+v, want %s", s.Name, n, d, compose.Healthy)
			}
		}
		d := single.Services[s.Name]
		if d.Environment["ALICIA_NATS_URL"] != "nats://nats:4222" || d.Environment["ALICIA_STREAM_REPLICAS"] != "1" {
			t.Errorf("%s without the cluster environment: ALICIA_NATS_URL %q, ALICIA_STREAM_REPLICAS %q; want the single nats at 1",
				s.Name, d.Environment["ALICIA_NATS_URL"], d.Environment["ALICIA_STREAM_REPLICAS"])
		}
	}
	if checked == 0 {
		t.Fatal("no long-running service built from deploy/Dockerfile is given ALICIA_NATS_URL")
	}
}

// tlsEnv is what deploy/README.md (TLS) has an operator put in .env: the
// one name, and LiveKit's TURN server's.
var tlsEnv = map[string]string{"ALICIA_PUBLIC_HOST": "alicia.example.com", "ALICIA_TURN_DOMAIN": "turn.example.com"}

// lanEnv is deploy/README.md's LAN path: this host's address and Caddy's CA.
var lanEnv = map[string]string{"ALICIA_PUBLIC_HOST": "192.168.1.20", "ALICIA_TLS": "internal"}

func withEnv(extra map[string]string) map[string]string {
	env := map[string]string{}
	for k, v := range composeEnv {
		env[k] = v
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// TestComposeTLSProfile: with the tls profile's environment the file keeps
// its contract; the proxy runs deploy/caddy/Caddyfile only in that profile,
// with the certificates of deploy/tls, in front of the gateway and LiveKit
// (the Caddyfile's upstreams are their addresses) under the one name
// ALICIA_PUBLIC_HOST, at a fixed address of the edge network outside the
// range the others get theirs from, which is the one address the gateway
// trusts for X-Forwarded-For. Setting ALICIA_PUBLIC_HOST is enough: the
// gateway then hands clients wss://<that name> (the proxy serves LiveKit's
// signalling there), marks its cookie Secure, and it and LiveKit's
// signalling are published on loopback only (so the gateway's /metrics
// needs no waiver); LiveKit gets the TURN settings and ports. Without it,
// clients get LiveKit's plain port at ALICIA_LIVEKIT_NODE_IP.
func TestComposeTLSProfile(t *testing.T) {
	r := loadRepo(t)
	caddyfile, err := os.ReadFile(filepath.Join(r.root, "deploy", "caddy", "Caddyfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		host string // the public name; "" : no proxy in front
		tls  string
	}{
		{"without the proxy", composeEnv, "", ""},
		{"a name, the operator's certificate", withEnv(tlsEnv), "alicia.example.com", "/etc/caddy/tls/fullchain.pem /etc/caddy/tls/privkey.pem"},
		{"a LAN address, Caddy's CA", withEnv(lanEnv), "192.168.1.20", "internal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := compose.Load(filepath.Join(r.root, "docker-compose.yml"), tc.env)
			if err != nil {
				t.Fatal(err)
			}
			c := r.contract(t)
			for _, p := range compose.Check(f, c) {
				t.Error(p)
			}
			proxy, gw, lk := f.Services["proxy"], f.Services["gateway"], f.Services["livekit"]
			if proxy == nil || !slices.Equal(proxy.Profiles, []string{"tls"}) {
				t.Fatalf("proxy: %+v; want a service of the tls profile only", proxy)
			}
			mounts := map[string]string{}
			for _, v := range proxy.Volumes {
				mounts[v.Target] = v.Source
			}
			if mounts["/etc/caddy/Caddyfile"] != "./deploy/caddy/Caddyfile" || mounts["/etc/caddy/tls"] != "./deploy/tls" || mounts["/data"] != "caddy-data" {
				t.Errorf("proxy mounts %v: want deploy/caddy/Caddyfile, deploy/tls, and caddy-data at /data (where the image keeps Caddy's CA)", mounts)
			}
			for _, p := range []string{"443:443", "80:80"} {
				if !slices.Contains(proxy.Ports, p) {
					t.Errorf("proxy ports %v: want %s", proxy.Ports, p)
				}
			}
			for _, d := range []string{"gateway", "livekit"} {
				if proxy.DependsOn[d].Condition != compose.Healthy {
					t.Errorf("proxy: depends on %s %+v, want healthy", d, proxy.DependsOn[d])
				}
			}
			addr := net.ParseIP(proxy.Networks["edge"])
			edge := f.Networks["edge"].IPAM.Config
			if addr == nil || len(edge) != 1 {
				t.Fatalf("proxy on the edge network at %q, edge ipam %+v", proxy.Networks["edge"], edge)
			}
			_, subnet, err1 := net.ParseCIDR(edge[0].Subnet)
			_, dynamic, err2 := net.ParseCIDR(edge[0].IPRange)
			if err1 != nil || err2 != nil || !subnet.Contains(addr) || dynamic.Contains(addr) {
				t.Errorf("proxy address %s: want it in the edge subnet %s and outside its dynamic range %s", addr, edge[0].Subnet, edge[0].IPRange)
			}
			if got := gw.Environment["ALICIA_TRUSTED_PROXIES"]; got != addr.String() {
				t.Errorf("gateway trusts %q, want exactly the proxy's address %s", got, addr)
			}
			for _, s := range []*compose.Service{gw, lk} {
				if _, ok := s.Networks["edge"]; !ok || s.Networks["edge"] != "" {
					t.Errorf("%s: networks %v; want the edge network with an address from its range", s.Name, s.Networks)
				}
			}
			for _, p := range []string{"5349:5349", "3478:3478/udp"} {
				if !slices.Contains(lk.Ports, p) {
					t.Errorf("livekit ports %v: want %s (TURN)", lk.Ports, p)
				}
			}
			_, gwPort, _ := net.SplitHostPort(gw.Environment["ALICIA_HTTP_ADDR"])
			for _, want := range []string{"{$ALICIA_GATEWAY_UPSTREAM:gateway:" + gwPort + "}", "{$ALICIA_LIVEKIT_UPSTREAM:livekit:7880}", "@livekit path /rtc /rtc/*"} {
				if !strings.Contains(string(caddyfile), want) {
					t.Errorf("deploy/caddy/Caddyfile has no %s", want)
				}
			}
			if tc.host == "" {
				if gw.Environment["ALICIA_COOKIE_SECURE"] != "" || gw.Environment["ALICIA_LIVEKIT_PUBLIC_URL"] != "ws://"+exampleNodeIP+":7880" ||
					!slices.Contains(gw.Ports, "8080:8080") || !slices.Contains(lk.Ports, "7880:7880") || lk.Environment["TURN_DOMAIN"] != "" {
					t.Errorf("without the tls environment: gateway cookie secure %q, LiveKit URL %q, ports %v; livekit ports %v, TURN %q",
						gw.Environment["ALICIA_COOKIE_SECURE"], gw.Environment["ALICIA_LIVEKIT_PUBLIC_URL"], gw.Ports, lk.Ports, lk.Environment["TURN_DOMAIN"])
				}
				return
			}
			if proxy.Environment["ALICIA_PUBLIC_HOST"] != tc.host || proxy.Environment["ALICIA_TLS"] != tc.tls {
				t.Errorf("proxy environment %v: want ALICIA_PUBLIC_HOST %q, ALICIA_TLS %q", proxy.Environment, tc.host, tc.tls)
			}
			if gw.Environment["ALICIA_LIVEKIT_PUBLIC_URL"] != "wss://"+tc.host {
				t.Errorf("gateway hands clients LiveKit at %q; want the page's own name, wss://%s", gw.Environment["ALICIA_LIVEKIT_PUBLIC_URL"], tc.host)
			}
			if gw.Environment["ALICIA_COOKIE_SECURE"] != "true" || !slices.Contains(gw.Ports, "127.0.0.1:8080:8080") || !slices.Contains(lk.Ports, "127.0.0.1:7880:7880") {
				t.Errorf("behind the proxy: gateway cookie secure %q, ports %v; livekit ports %v; want Secure and both on loopback",
					gw.Environment["ALICIA_COOKIE_SECURE"], gw.Ports, lk.Ports)
			}
			if want := tc.env["ALICIA_TURN_DOMAIN"]; lk.Environment["TURN_DOMAIN"] != want {
				t.Errorf("livekit TURN_DOMAIN %q, want %q", lk.Environment["TURN_DOMAIN"], want)
			}
		})
	}
}

// TestComposeBackupProfile: the backup job runs `alicia backup` into
// deploy/backups, only in the backup profile, as the NATS admin and the
// database's superuser (with the roles' URLs, for a restore), after the
// schema exists, with the services' NATS URL and stream replicas.
func TestComposeBackupProfile(t *testing.T) {
	r := loadRepo(t)
	f, err := compose.Load(filepath.Join(r.root, "docker-compose.yml"), withEnv(map[string]string{
		"ALICIA_NATS_URL": "nats://nats-1:4222,nats://nats-2:4222,nats://nats-3:4222", "ALICIA_STREAM_REPLICAS": "3"}))
	if err != nil {
		t.Fatal(err)
	}
	b := f.Services["backup"]
	if b == nil || !slices.Equal(b.Profiles, []string{"backup"}) || !b.OneShot() || b.Ref() != "build:cli" {
		t.Fatalf("backup: %+v; want a one-shot alicia job of the backup profile", b)
	}
	if !slices.Equal(b.Command, []string{"backup", "--dir", "/backups"}) {
		t.Errorf("backup command %q", b.Command)
	}
	if !slices.ContainsFunc(b.Volumes, func(v compose.Volume) bool { return v.Source == "./deploy/backups" && v.Target == "/backups" }) {
		t.Errorf("backup volumes %+v: want deploy/backups at /backups", b.Volumes)
	}
	if b.Environment["ALICIA_NATS_USER"] != "admin" || b.Environment["ALICIA_NATS_PASSWORD_FILE"] != "/run/secrets/nats_password_admin" {
		t.Errorf("backup logs in to NATS as %q: want the admin (snapshots and restores use the JetStream API)", b.Environment["ALICIA_NATS_USER"])
	}
	if b.Environment["ALICIA_STREAM_REPLICAS"] != "3" || !strings.HasPrefix(b.Environment["ALICIA_NATS_URL"], "nats://nats-1:4222") {
		t.Errorf("backup: NATS %q, replicas %q; want the services' cluster settings", b.Environment["ALICIA_NATS_URL"], b.Environment["ALICIA_STREAM_REPLICAS"])
	}
	if b.DependsOn["migrate"].Condition != compose.Completed || b.DependsOn["nats"].Condition != compose.Healthy {
		t.Errorf("backup depends on %+v", b.DependsOn)
	}
}

// TestStopGracePeriod: compose waits for every long-running Alicia service
// to drain (ALICIA_SHUTDOWN_TIMEOUT's default) and hand back what it holds
// before it kills it (its own default, 10s, is shorter); and each reads
// .env, when there is one.
func TestStopGracePeriod(t *testing.T) {
	f := loadRepo(t).file(t)
	want := svcmain.DefaultShutdownTimeout + svcmain.HandBackTime
	checked := 0
	for _, s := range f.BuiltFrom("deploy/Dockerfile") {
		if s.OneShot() {
			continue
		}
		checked++
		// .env.example's promise: a tuning variable in .env reaches the
		// service, and a deployment without .env still starts.
		if !slices.Equal(s.EnvFiles, compose.EnvFiles{{Path: ".env", Required: false}}) {
			t.Errorf("%s: env_file %+v; want .env, not required", s.Name, s.EnvFiles)
		}
		d, err := time.ParseDuration(s.StopGracePeriod)
		if err != nil || d < want {
			t.Errorf("%s: stop_grace_period %q; want at least %s (the drain and the hand-back)", s.Name, s.StopGracePeriod, want)
		}
	}
	if checked == 0 {
		t.Fatal("no long-running service built from deploy/Dockerfile")
	}
}
