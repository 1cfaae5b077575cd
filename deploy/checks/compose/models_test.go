package compose_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/alicia-voice/alicia/deploy/checks/compose"
)

// commit is a Hugging Face commit id: what a pinned revision names.
var commit = regexp.MustCompile(`^[0-9a-f]{40}$`)

// unpinned are the models downloaded at main as it is then (the commit is
// kept on the volume and printed by the download), each with why.
var unpinned = map[string]string{
	"speaches-ai/Kokoro-82M-v1.0-ONNX": "no commit of it could be confirmed without the Hub (deploy/README.md, Models and caches)",
}

// flagValue is the value after name in words ("" : absent).
func flagValue(words []string, name string) string {
	for i, w := range words {
		if w == name && i+1 < len(words) {
			return words[i+1]
		}
		if v, ok := strings.CutPrefix(w, name+"="); ok {
			return v
		}
	}
	return ""
}

// served is a model a server loads at start (or a download fetches): the
// service and its image, the model id, the revision it asks for ("" :
// whatever the download put on its volume) and the volume mount holding
// its weights.
type served struct {
	server, image, model, revision string
	cache                          compose.Volume
}

// cacheMount is s's mount at one of targets.
func cacheMount(s *compose.Service, targets ...string) compose.Volume {
	for _, v := range s.Volumes {
		if slices.Contains(targets, v.Target) {
			return v
		}
	}
	return compose.Volume{}
}

const (
	vllmHub     = "/root/.cache/huggingface"
	vllmCompile = "/root/.cache/vllm" // VLLM_CACHE_ROOT's default (vllm/envs.py)
	speachesHub = "/home/ubuntu/.cache/huggingface/hub"
)

// modelProblems: the model servers start without the network, with the
// models their clients ask for, at pinned revisions, loaded at start and
// kept loaded; the download services put exactly those weights where the
// servers read them.
func modelProblems(f *compose.File) []string {
	var ps []string
	bad := func(format string, args ...any) { ps = append(ps, fmt.Sprintf(format, args...)) }
	svc := func(name string) *compose.Service {
		if s := f.Services[name]; s != nil {
			return s
		}
		bad("no service %s", name)
		return &compose.Service{Name: name, Environment: compose.Environment{}}
	}
	sp, asr, tts := svc("speaches"), svc("asr"), svc("tts")

	var models []served
	for _, c := range []struct{ server, client, variable string }{
		{"vllm", "llm", "ALICIA_LLM_MODEL"}, {"embeddings", "memory", "ALICIA_EMBEDDING_MODEL"},
	} {
		s := svc(c.server)
		m, rev := flagValue(s.Command, "--model"), flagValue(s.Command, "--revision")
		if want := svc(c.client).Environment[c.variable]; m != want {
			bad("%s serves %q; %s asks for %q (%s)", c.server, m, c.client, want, c.variable)
		}
		if !commit.MatchString(rev) {
			bad("%s: --revision %q: pin the model to a commit", c.server, rev)
		}
		if tr := flagValue(s.Command, "--tokenizer-revision"); tr != rev {
			bad("%s: --tokenizer-revision %q, --revision %q: the tokenizer of another commit", c.server, tr, rev)
		}
		if v := cacheMount(s, vllmCompile); v.Type != "volume" {
			bad("%s: no volume at %s: every new container compiles again", c.server, vllmCompile)
		}
		models = append(models, served{c.server, s.Image, m, rev, cacheMount(s, vllmHub)})
	}

	load := strings.Fields(sp.Environment["LOAD_MODELS"])
	asks := []string{asr.Environment["ALICIA_ASR_MODEL"], tts.Environment["ALICIA_TTS_MODEL"]}
	if !slices.Equal(slices.Sorted(slices.Values(load)), slices.Sorted(slices.Values(asks))) {
		bad("speaches loads %v at start; asr and tts ask for %v", load, asks)
	}
	for _, m := range load {
		models = append(models, served{"speaches", sp.Image, m, "", cacheMount(sp, speachesHub)})
	}
	for k, want := range map[string]string{"STT_MODEL_TTL": "-1", "TTS_MODEL_TTL": "-1"} {
		if got := sp.Environment[k]; got != want {
			bad("speaches: %s=%q; want %s (its default, 300, unloads a model idle for five minutes)", k, got, want)
		}
	}
	if lvl := strings.ToLower(sp.Environment["LOG_LEVEL"]); lvl == "" || lvl == "debug" {
		bad("speaches: LOG_LEVEL=%q logs at debug (its default)", sp.Environment["LOG_LEVEL"])
	}
	if v := sp.Environment["PRELOAD_MODELS"]; v != "" {
		bad("speaches: PRELOAD_MODELS=%s asks the Hub for its model list at every start, and exits without it", v)
	}
	if ep := strings.Join(sp.Entrypoint, "\n"); !strings.Contains(ep, "/api/ps/$m") || !strings.Contains(ep, "$LOAD_MODELS") {
		bad("speaches: its entrypoint does not load $LOAD_MODELS (POST /api/ps/<model>)")
	}
	if sp.Healthcheck == nil || !strings.Contains(strings.Join(sp.Healthcheck.Test, " "), "/api/ps") {
		bad("speaches: its healthcheck does not ask which models are loaded (/api/ps)")
	}
	for _, name := range []string{"vllm", "embeddings", "speaches"} {
		s := svc(name)
		if s.Environment["HF_HUB_OFFLINE"] != "1" {
			bad("%s: HF_HUB_OFFLINE=%q: a restart needs the Hub", name, s.Environment["HF_HUB_OFFLINE"])
		}
		if _, ok := s.Environment["HF_TOKEN"]; !ok {
			bad("%s: HF_TOKEN is not passed through", name)
		}
	}

	downloads := map[string]served{} // model → where a download puts it
	for _, s := range f.Sorted() {
		if !slices.Equal(s.Profiles, []string{"download"}) {
			continue
		}
		if !s.OneShot() || s.Environment["HF_HUB_OFFLINE"] == "1" {
			bad("%s: want a one-shot job with the Hub (restart %q, HF_HUB_OFFLINE %q)", s.Name, s.Restart, s.Environment["HF_HUB_OFFLINE"])
		}
		if _, ok := s.Environment["HF_TOKEN"]; !ok {
			bad("%s: HF_TOKEN is not passed through", s.Name)
		}
		for _, spec := range strings.Fields(s.Environment["MODELS"]) {
			m, rev, _ := strings.Cut(spec, "@")
			downloads[m] = served{s.Name, s.Image, m, rev, cacheMount(s, vllmHub, speachesHub)}
		}
	}
	for _, m := range models {
		d, ok := downloads[m.model]
		switch {
		case !ok:
			bad("%s loads %s, which no download service fetches", m.server, m.model)
		case d.cache != m.cache:
			bad("%s reads %s from %+v; %s puts it in %+v", m.server, m.model, m.cache, d.server, d.cache)
		case m.revision != "" && d.revision != m.revision:
			bad("%s loads %s at %s; %s fetches %q", m.server, m.model, m.revision, d.server, d.revision)
		case !commit.MatchString(d.revision) && unpinned[m.model] == "":
			bad("%s fetches %s at %q: pin it to a commit", d.server, m.model, d.revision)
		case d.image != m.image:
			bad("%s fetches %s with %s, %s loads it with %s: the images run as other users, one cannot write what the other made", d.server, m.model, d.image, m.server, m.image)
		}
	}
	sort.Strings(ps)
	return ps
}

// TestModelServers: the rules of modelProblems hold for the repository's
// file, and each fails on a broken copy.
func TestModelServers(t *testing.T) {
	r := loadRepo(t)
	for _, p := range modelProblems(r.file(t)) {
		t.Error(p)
	}
	for _, tc := range []struct {
		name   string
		break_ func(f *compose.File)
		want   string
	}{
		{"Whisper unloaded when idle", func(f *compose.File) { delete(f.Services["speaches"].Environment, "STT_MODEL_TTL") }, "STT_MODEL_TTL"},
		{"Kokoro unloaded when idle", func(f *compose.File) { f.Services["speaches"].Environment["TTS_MODEL_TTL"] = "300" }, "TTS_MODEL_TTL"},
		{"speaches at its default log level", func(f *compose.File) { delete(f.Services["speaches"].Environment, "LOG_LEVEL") }, "logs at debug"},
		{"speaches asking the Hub at start", func(f *compose.File) {
			f.Services["speaches"].Environment["PRELOAD_MODELS"] = `["Systran/faster-whisper-large-v3"]`
		}, "PRELOAD_MODELS"},
		{"a model asr asks for and speaches does not load", func(f *compose.File) {
			f.Services["asr"].Environment["ALICIA_ASR_MODEL"] = "Systran/faster-whisper-small"
		}, "asr and tts ask for"},
		{"speaches loading nothing at start", func(f *compose.File) {
			f.Services["speaches"].Entrypoint = compose.Words{"/bin/sh", "-c", "exec uvicorn --factory speaches.main:create_app"}
		}, "does not load $LOAD_MODELS"},
		{"vLLM on a branch", func(f *compose.File) {
			s := f.Services["vllm"]
			s.Command[slices.Index(s.Command, "--revision")+1] = "main"
		}, "vllm: --revision \"main\""},
		{"a model memory does not ask for", func(f *compose.File) {
			s := f.Services["embeddings"]
			s.Command[slices.Index(s.Command, "--model")+1] = "BAAI/bge-large-en"
		}, "memory asks for"},
		{"embeddings needing the Hub at start", func(f *compose.File) { delete(f.Services["embeddings"].Environment, "HF_HUB_OFFLINE") }, "embeddings: HF_HUB_OFFLINE"},
		{"no token for a gated model", func(f *compose.File) { delete(f.Services["download-vllm"].Environment, "HF_TOKEN") }, "download-vllm: HF_TOKEN"},
		{"torch.compile's artefacts in the container", func(f *compose.File) {
			f.Services["vllm"].Volumes = slices.DeleteFunc(f.Services["vllm"].Volumes, func(v compose.Volume) bool { return v.Target == vllmCompile })
		}, "every new container compiles again"},
		{"a model no download fetches", func(f *compose.File) {
			s := f.Services["download-vllm"]
			s.Environment["MODELS"] = strings.Fields(s.Environment["MODELS"])[0]
		}, "embeddings loads BAAI/bge-m3, which no download service fetches"},
		{"a download of another commit", func(f *compose.File) {
			s := f.Services["download-vllm"]
			s.Environment["MODELS"] = regexp.MustCompile(`@[0-9a-f]{40}`).ReplaceAllString(s.Environment["MODELS"], "@"+strings.Repeat("0", 40))
		}, "vllm loads Qwen/Qwen2.5-7B-Instruct-AWQ at"},
		{"Whisper downloaded at main", func(f *compose.File) {
			s := f.Services["download-speaches"]
			s.Environment["MODELS"] = regexp.MustCompile(`faster-whisper-large-v3@[0-9a-f]*`).ReplaceAllString(s.Environment["MODELS"], "faster-whisper-large-v3@")
		}, "fetches Systran/faster-whisper-large-v3 at \"\": pin it"},
		{"a download into another volume", func(f *compose.File) {
			f.Services["download-speaches"].Volumes = []compose.Volume{{Type: "volume", Source: "models", Target: speachesHub}}
		}, "speaches reads Systran/faster-whisper-large-v3 from"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := r.file(t)
			tc.break_(f)
			got := modelProblems(f)
			if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Fatalf("no problem saying %q; got:\n%s", tc.want, strings.Join(got, "\n"))
			}
		})
	}
}

// natsProblems: the compose NATS servers run the nats-server the tests
// embed (and alicia up runs): what the tests show of JetStream is what
// compose runs.
func natsProblems(f *compose.File) []string {
	want := "nats:" + server.VERSION + "-alpine"
	var ps []string
	for _, s := range f.Sorted() {
		if strings.HasPrefix(s.Image, "nats:") && s.Image != want {
			ps = append(ps, fmt.Sprintf("%s runs %s; the tests embed nats-server %s (%s)", s.Name, s.Image, server.VERSION, want))
		}
	}
	return ps
}

func TestNATSVersion(t *testing.T) {
	f := loadRepo(t).file(t)
	for _, p := range natsProblems(f) {
		t.Error(p)
	}
	n := 0
	for _, s := range f.Services {
		if strings.HasPrefix(s.Image, "nats:") {
			n++
		}
	}
	if n != 4 {
		t.Errorf("%d services run the nats image; want the single server and the cluster's three nodes", n)
	}
	f.Services["nats-2"].Image = "nats:2.12.8-alpine"
	if ps := natsProblems(f); len(ps) != 1 || !strings.Contains(ps[0], "nats-2 runs nats:2.12.8-alpine") {
		t.Fatalf("an older node: %q", ps)
	}
}

// pgReadyProblems: postgres's healthcheck asks over TCP. On a new volume
// the image's entrypoint first runs a server for the init scripts that
// listens on the Unix socket only (docker_temp_server_start:
// an empty listen_addresses): pg_isready over the socket calls it ready, the
// migrate job (over TCP) finds nothing, then that server stops and the
// real one starts.
func pgReadyProblems(f *compose.File) []string {
	s := f.Services["postgres"]
	if s == nil || s.Healthcheck == nil {
		return []string{"postgres has no healthcheck"}
	}
	words := s.Healthcheck.Test
	if len(words) > 1 && words[0] == "CMD-SHELL" {
		words = strings.Fields(words[1])
	}
	if !slices.Contains(words, "pg_isready") {
		return []string{fmt.Sprintf("postgres's healthcheck %q does not run pg_isready", s.Healthcheck.Test)}
	}
	if h := flagValue(words, "-h"); h != "127.0.0.1" && h != "localhost" && h != "::1" {
		return []string{fmt.Sprintf("postgres's healthcheck %q asks over the Unix socket (-h %q): the init scripts' socket-only server answers it", s.Healthcheck.Test, h)}
	}
	return nil
}

func TestPostgresReady(t *testing.T) {
	f := loadRepo(t).file(t)
	for _, p := range pgReadyProblems(f) {
		t.Error(p)
	}
	f.Services["postgres"].Healthcheck.Test = compose.Words{"CMD-SHELL", "pg_isready -U alicia -d alicia"}
	if ps := pgReadyProblems(f); len(ps) != 1 || !strings.Contains(ps[0], "over the Unix socket") {
		t.Fatalf("pg_isready without -h: %q", ps)
	}
}

// TestPrometheusService: the metrics profile runs Prometheus with
// deploy/prometheus/prometheus.yml and the alert rules it names, keeps its
// data in a volume, and publishes its UI on this host only.
func TestPrometheusService(t *testing.T) {
	r := loadRepo(t)
	f := r.file(t)
	p := f.Services["prometheus"]
	if p == nil || !slices.Equal(p.Profiles, []string{"metrics"}) {
		t.Fatalf("prometheus: %+v; want a service of the metrics profile only", p)
	}
	mounts := map[string]compose.Volume{}
	for _, v := range p.Volumes {
		mounts[v.Target] = v
	}
	conf := flagValue(p.Command, "--config.file")
	if mounts[conf].Source != "./deploy/prometheus/prometheus.yml" {
		t.Errorf("--config.file %q is %+v; want deploy/prometheus/prometheus.yml", conf, mounts[conf])
	}
	b, err := os.ReadFile(filepath.Join(r.root, "deploy", "prometheus", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, rule := range regexp.MustCompile(`(?m)^\s+- (/etc/prometheus/\S+)$`).FindAllStringSubmatch(string(b), -1) {
		if want := "./deploy/prometheus/" + filepath.Base(rule[1]); mounts[rule[1]].Source != want {
			t.Errorf("prometheus.yml reads the rules %s; mounted there: %+v, want %s", rule[1], mounts[rule[1]], want)
		}
	}
	if data := mounts[flagValue(p.Command, "--storage.tsdb.path")]; data.Type != "volume" {
		t.Errorf("Prometheus's data (--storage.tsdb.path %q) is not in a volume: %+v", flagValue(p.Command, "--storage.tsdb.path"), data)
	}
	for _, pub := range p.Published() {
		if pub.HostIP != "127.0.0.1" {
			t.Errorf("prometheus publishes %+v; want its UI on 127.0.0.1 only", pub)
		}
	}
	if len(p.Networks) > 0 {
		if _, ok := p.Networks["default"]; !ok {
			t.Errorf("prometheus on %v: the services' metrics are on the default network", p.Networks)
		}
	}
}

// TestGatewayMetricsAddress: compose gives the gateway a metrics address
// of its own (its HTTP port, which clients reach, then shows no /metrics),
// and the gateway reads that variable.
func TestGatewayMetricsAddress(t *testing.T) {
	r := loadRepo(t)
	reads, err := compose.SourceReads(t.Context(), r.root, mainPackage("gateway"))
	if err != nil {
		t.Fatal(err)
	}
	if !reads["ALICIA_GATEWAY_METRICS_ADDR"] {
		t.Fatal("the gateway no longer reads ALICIA_GATEWAY_METRICS_ADDR")
	}
	f, err := compose.Load(filepath.Join(r.root, "docker-compose.yml"), composeEnv)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Services["gateway"].Environment["ALICIA_GATEWAY_METRICS_ADDR"]; got == "" {
		t.Fatal("docker-compose.yml gives the gateway no ALICIA_GATEWAY_METRICS_ADDR: it serves /metrics on the port clients reach")
	}
}
