package compose

import (
	"regexp"
	"strings"
)

// Pinned reports whether an image reference names one release: a digest,
// or a tag carrying a full version (major.minor.patch) or a dated snapshot
// (debian:bookworm-20251229-slim). latest, a bare name and a major or
// major.minor tag (nats:2.12-alpine) float: the next pull can bring another
// release than the one this file was checked against.
func Pinned(ref string) bool {
	if strings.Contains(ref, "@sha256:") {
		return true
	}
	tag := imageTag(ref)
	if tag == "" || strings.Contains(tag, "latest") {
		return false
	}
	return fullVersion.MatchString(tag) || datedTag.MatchString(tag)
}

var (
	fullVersion = regexp.MustCompile(`(^|[^0-9.])v?\d+\.\d+\.\d+`)
	datedTag    = regexp.MustCompile(`(^|-)20\d{6}(-|$)`)
)

// imageTag returns the tag of ref ("" when it has none); a registry port
// (host:5000/name) is not a tag.
func imageTag(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") {
		return ""
	}
	return ref[i+1:]
}

// Image is what the checks know about a third-party image at one pinned
// release: the flags its program accepts, the environment variables it
// reads, and the programs a healthcheck can run in it. Each entry says
// where the facts come from, so the next bump checks them again.
type Image struct {
	// Program is the path of the program a shell entrypoint execs; its
	// flags are the words after it. Empty: the command is the arguments.
	Program string
	// Flags the program accepts; a non-nil value lists the values a flag
	// accepts (a subset: the ones this file may use).
	Flags map[string][]string
	// Env the image reads.
	Env []string
	// Tools a healthcheck may run (CMD's first word, CMD-SHELL's first word).
	Tools []string
	// Source of these facts.
	Source string
}

// Images are the third-party images docker-compose.yml may use, by exact
// reference. Using another release means adding it here after checking its
// flags, so a flag an image dropped (vLLM's --task) cannot slip through.
var Images = map[string]Image{
	"nats:2.15.2-alpine": {
		Program: "nats-server",
		Flags:   map[string][]string{"-c": nil, "--config": nil, "-js": nil, "--jetstream": nil, "-sd": nil, "--store_dir": nil, "-m": nil, "--http_port": nil},
		Tools:   []string{"wget"}, // busybox
		Source: "nats-server v2.15.2 `nats-server --help` (Server Options, JetStream Options; the module the tests embed, server/const.go VERSION); " +
			"the image is nats-docker's alpine build (2.14.x/alpine3.22/Dockerfile: alpine, busybox wget, nats-server in /usr/local/bin)",
	},
	"pgvector/pgvector:0.8.1-pg17": {
		Flags: map[string][]string{"postgres": nil, "-c": nil},
		Env: []string{"POSTGRES_USER", "POSTGRES_DB", "POSTGRES_PASSWORD", "POSTGRES_PASSWORD_FILE",
			// Not the image's: read by deploy/postgres-init.sql, which it runs (deploycmd.PostgresInitSQL).
			"POSTGRES_MIGRATOR_PASSWORD_FILE", "POSTGRES_WRITER_PASSWORD_FILE", "POSTGRES_READER_PASSWORD_FILE"},
		Tools: []string{"pg_isready"},
		Source: "the postgres:17 image's docker-entrypoint.sh (file_env POSTGRES_PASSWORD, POSTGRES_USER, POSTGRES_DB; " +
			"`postgres -c name=value`; runs /docker-entrypoint-initdb.d/*.sql with psql on a new volume, with a temporary server " +
			"on the Unix socket only: docker_temp_server_start, listen_addresses=''), which pgvector/pgvector v0.8.1's Dockerfile builds on (FROM postgres:17-bookworm)",
	},
	"livekit/livekit-server:v1.13.5": {
		Program: "/livekit-server",
		Flags:   map[string][]string{"--config": nil, "--keys": nil, "--node-ip": nil, "--bind": nil, "--dev": nil, "--udp-port": nil},
		Env: []string{"LIVEKIT_KEYS", "LIVEKIT_CONFIG", "NODE_IP", "UDP_PORT", "REDIS_HOST", "REDIS_PASSWORD",
			// Not the image's: read by the compose file's entrypoint, which adds a turn: section with them.
			"TURN_DOMAIN", "TURN_CERT_FILE", "TURN_KEY_FILE"},
		Tools:  []string{"wget"}, // alpine busybox
		Source: "livekit-server v1.13.5 cmd/server/main.go (cli flags and their EnvVars); the image is alpine",
	},
	"vllm/vllm-openai:v0.11.0": {
		Flags: map[string][]string{
			"--model": nil, "--served-model-name": nil, "--host": nil, "--port": nil,
			// A model's commit: what was downloaded, loaded offline.
			"--revision": nil, "--tokenizer-revision": nil,
			"--quantization":            {"awq", "awq_marlin", "gptq", "gptq_marlin", "fp8"},
			"--max-model-len":           nil,
			"--gpu-memory-utilization":  nil,
			"--enable-auto-tool-choice": nil,
			"--tool-call-parser":        {"hermes", "llama3_json", "mistral"},
			// --runner and --convert replaced --task (deprecated in v0.10,
			// removed in v0.13): --task is deliberately absent.
			"--runner":  {"auto", "generate", "pooling", "draft"},
			"--convert": {"auto", "none", "embed", "classify", "reward"},
		},
		Env: []string{
			// huggingface_hub's: no Hub request (vLLM's weight_utils passes
			// local_files_only=HF_HUB_OFFLINE), and the token of a gated model.
			"HF_HUB_OFFLINE", "HF_TOKEN",
			// vllm/envs.py: no usage report.
			"VLLM_NO_USAGE_STATS",
			// Not the image's: read by the compose file's entrypoints (the
			// GPU start order; the download services' script).
			"GPU_AFTER", "GPU_WAIT", "MODELS", "IGNORE"},
		Tools: []string{"curl"},
		Source: "vLLM v0.11 engine arguments (docs.vllm.ai, configuration/engine_args: ModelConfig --runner/--convert, --revision, --tokenizer-revision, --quantization choices) " +
			"and serve arguments (--enable-auto-tool-choice, --tool-call-parser); vllm/envs.py (VLLM_CACHE_ROOT = ~/.cache/vllm, VLLM_NO_USAGE_STATS); " +
			"its docker/Dockerfile's vllm-openai stage (ENTRYPOINT [\"vllm\", \"serve\"]; curl and python3 with huggingface_hub installed)",
	},
	"caddy:2.11.4-alpine": {
		Program: "caddy",
		// run is the subcommand (a word the check lets through in first place).
		Flags: map[string][]string{"run": nil, "--config": nil, "--adapter": {"caddyfile"}, "--envfile": nil, "--environ": nil, "--resume": nil, "--watch": nil},
		// Not the image's: read by deploy/caddy/Caddyfile ({$NAME}) and the
		// compose file's entrypoint, which runs it.
		Env:   []string{"ALICIA_PUBLIC_HOST", "ALICIA_TLS", "ALICIA_TLS_CA", "ALICIA_GATEWAY_UPSTREAM", "ALICIA_LIVEKIT_UPSTREAM", "CADDY_ADMIN"},
		Tools: []string{"wget"}, // alpine busybox
		Source: "caddy v2.11.4 cmd/commandfuncs.go (`caddy run` flags --config, --adapter, --envfile, --environ, --resume, --watch) and admin.go (CADDY_ADMIN); " +
			"storage.go AppDataDir ($XDG_DATA_HOME/caddy) and modules/caddypki/ca.go (the local CA's root at pki/authorities/local/root.crt); " +
			"the official image (caddy-docker 2.11/alpine/Dockerfile) is alpine with busybox wget, XDG_DATA_HOME=/data and XDG_CONFIG_HOME=/config; " +
			"composecheck's tlstest runs the same Caddyfile, through the compose file's entrypoint, with caddy built from that module version",
	},
	"ghcr.io/speaches-ai/speaches:0.9.0-rc.3-cuda-12.6.3": {
		Env: []string{"PRELOAD_MODELS", "API_KEY", "LOG_LEVEL", "ENABLE_UI", "ALLOW_ORIGINS", "UVICORN_HOST", "UVICORN_PORT",
			"STT_MODEL_TTL", "TTS_MODEL_TTL",
			// huggingface_hub's: no Hub request, and the token of a gated model.
			"HF_HUB_OFFLINE", "HF_TOKEN",
			// Not the image's: read by the compose file's entrypoints (the
			// GPU start order, the models loaded at start, the download).
			"GPU_AFTER", "GPU_WAIT", "LOAD_MODELS", "MODELS", "IGNORE"},
		Tools: []string{"curl"},
		Source: "speaches v0.9.0-rc.3 (commit 24f209c): src/speaches/config.py (pydantic settings: stt_model_ttl and tts_model_ttl, -1 never unloads; " +
			"log_level, default debug; enable_ui; preload_models, downloaded by main.py's lifespan through the Hub's model list), " +
			"src/speaches/routers/misc.py (GET /api/ps lists the loaded models, POST /api/ps/{model_id} loads one from the local cache), " +
			"src/speaches/executors/shared/base_model_manager.py (a model with ttl -1 is never unloaded) and its Dockerfile " +
			"(apt-get install curl; uid 1000; CMD uvicorn --factory speaches.main:create_app on UVICORN_HOST:UVICORN_PORT, 0.0.0.0:8000)",
	},
	"prom/prometheus:v3.14.0": {
		Flags: map[string][]string{"--config.file": nil, "--storage.tsdb.path": nil, "--web.listen-address": nil,
			"--web.enable-lifecycle": nil, "--storage.tsdb.retention.time": nil, "--storage.tsdb.retention.size": nil},
		Tools: []string{"wget"}, // busybox
		Source: "prometheus v3.14.0 (commit d7598b7): cmd/prometheus/main.go (the flags), its Dockerfile (quay.io/prometheus/busybox, " +
			"ENTRYPOINT /bin/prometheus, USER nobody, /prometheus the data directory), discovery/dns/dns.go (dns_sd_configs: type A with a port) " +
			"and web/web.go (/-/ready)",
	},
}
