package compose_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/devtools"
	"github.com/alicia-voice/alicia/pkg/natsauth"
)

// composeConfig runs `docker compose -f file config -q` (no Docker engine
// needed) with only env set, and returns its exit error and stderr.
func composeConfig(t *testing.T, bin, file string, env map[string]string, args ...string) (string, error) {
	t.Helper()
	// No .env of the developer's: an empty env file.
	envFile := filepath.Join(t.TempDir(), "env")
	if err := os.WriteFile(envFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"--env-file", envFile, "-f", file}, append(args, "config", "-q")...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	return stderr.String(), err
}

// TestComposeConfig: the compose plugin itself accepts the file, with
// each profile and with all of them (and the environment each is
// documented with), and refuses it without ALICIA_LIVEKIT_NODE_IP or with
// a dependency on no service.
func TestComposeConfig(t *testing.T) {
	bin := devtools.Need(t, devtools.Compose)
	out, err := exec.Command(bin, "version", "--short").Output()
	if err != nil || strings.TrimSpace(string(out)) != strings.TrimPrefix(devtools.Compose.Version, "v") {
		t.Fatalf("%s version: %q, %v", bin, out, err)
	}
	file := filepath.Join(repoRoot(t), "docker-compose.yml")
	cluster := withEnv(map[string]string{"ALICIA_NATS_URL": "nats://nats-1:4222,nats://nats-2:4222,nats://nats-3:4222", "ALICIA_STREAM_REPLICAS": "3"})
	for _, c := range []struct {
		name     string
		env      map[string]string
		profiles []string
	}{
		{"the default services", composeEnv, nil},
		{"init", composeEnv, []string{"init"}},
		{"cluster", cluster, []string{"cluster"}},
		{"tls", withEnv(tlsEnv), []string{"tls"}},
		{"tls on a LAN address", withEnv(lanEnv), []string{"tls"}},
		{"backup", composeEnv, []string{"backup"}},
		{"download", composeEnv, []string{"download"}},
		{"metrics", composeEnv, []string{"metrics"}},
		{"every profile, with the .env of deploy/README.md's examples", withEnv(merge(tlsEnv, cluster)), []string{"*"}},
	} {
		var args []string
		for _, p := range c.profiles {
			args = append(args, "--profile", p)
		}
		if stderr, err := composeConfig(t, bin, file, c.env, args...); err != nil {
			t.Errorf("docker compose %s config -q (%s): %v\n%s", strings.Join(args, " "), c.name, err, stderr)
		}
	}
	t.Run(".env.example with every default set", func(t *testing.T) {
		// The file an operator copies, every line uncommented: compose reads
		// it (for interpolation, and as the services' env_file) and gets the
		// values meant, a value with a space included.
		example, err := os.ReadFile(filepath.Join(repoRoot(t), ".env.example"))
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, l := range strings.Split(string(example), "\n") {
			if m := envLine.FindStringSubmatch(l); m != nil {
				if m[2] == "ALICIA_LIVEKIT_NODE_IP" {
					m[3] = exampleNodeIP
				}
				l = m[2] + "=" + m[3]
			}
			lines = append(lines, l)
		}
		envFile := filepath.Join(t.TempDir(), ".env")
		if err := os.WriteFile(envFile, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "--env-file", envFile, "-f", file, "--profile", "*", "config", "--format", "json")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("docker compose --env-file <.env.example, uncommented> config: %v\n%s", err, stderr.String())
		}
		var cfg struct {
			Services map[string]struct {
				Environment map[string]*string `json:"environment"`
			} `json:"services"`
		}
		if err := json.Unmarshal(out, &cfg); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ service, name, want string }{
			{"proxy", "ALICIA_TLS", "/etc/caddy/tls/fullchain.pem /etc/caddy/tls/privkey.pem"},
			{"gateway", "ALICIA_TRUSTED_PROXIES", "172.31.250.10"},
			{"gateway", "ALICIA_COOKIE_SECURE", "false"},
			{"persistence", "ALICIA_CONVERSATIONS_MAX_BYTES", "4294967296"},
			{"llm", "ALICIA_SYSTEM_MAX_BYTES", "-1"},
			{"livekit", "NODE_IP", exampleNodeIP},
		} {
			got := cfg.Services[c.service].Environment[c.name]
			if got == nil || *got != c.want {
				t.Errorf("%s: %s = %v, want %q", c.service, c.name, got, c.want)
			}
		}
	})
	t.Run("the one name of the tls profile, as compose interpolates it", func(t *testing.T) {
		// ALICIA_PUBLIC_HOST alone switches the gateway behind the proxy
		// (${ALICIA_PUBLIC_HOST:+…} forms): compose must read them as
		// compose.Interpolate does.
		for _, c := range []struct {
			env                    map[string]string
			url, secure, published string
		}{
			{composeEnv, "ws://" + exampleNodeIP + ":7880", "", ""},
			{withEnv(tlsEnv), "wss://alicia.example.com", "true", "127.0.0.1"},
			{withEnv(lanEnv), "wss://192.168.1.20", "true", "127.0.0.1"},
		} {
			cfg := composeJSON(t, bin, file, c.env, "--profile", "tls")
			gw, lk := cfg.Services["gateway"], cfg.Services["livekit"]
			if got := gw.Environment["ALICIA_LIVEKIT_PUBLIC_URL"]; got == nil || *got != c.url {
				t.Errorf("ALICIA_PUBLIC_HOST %q: the gateway hands out %v, want %s", c.env["ALICIA_PUBLIC_HOST"], got, c.url)
			}
			if got := gw.Environment["ALICIA_COOKIE_SECURE"]; got == nil || *got != c.secure {
				t.Errorf("ALICIA_PUBLIC_HOST %q: ALICIA_COOKIE_SECURE %v, want %q", c.env["ALICIA_PUBLIC_HOST"], got, c.secure)
			}
			for _, s := range []composeService{gw, lk} {
				for _, p := range s.Ports {
					if (p.Target == 8080 || p.Target == 7880) && p.HostIP != c.published {
						t.Errorf("ALICIA_PUBLIC_HOST %q: port %d published on %q, want %q", c.env["ALICIA_PUBLIC_HOST"], p.Target, p.HostIP, c.published)
					}
				}
			}
		}
	})
	if stderr, err := composeConfig(t, bin, file, nil); err == nil || !strings.Contains(stderr, "ALICIA_LIVEKIT_NODE_IP") {
		t.Fatalf("accepted without ALICIA_LIVEKIT_NODE_IP: %v\n%s", err, stderr)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(t.TempDir(), "docker-compose.yml")
	if err := os.WriteFile(broken, bytes.Replace(data, []byte("vllm: {condition: service_healthy}"), []byte("vlm: {condition: service_healthy}"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	// Relative paths resolve in the repository, as for the real file.
	if stderr, err := composeConfig(t, bin, broken, composeEnv, "--project-directory", filepath.Dir(file)); err == nil || !strings.Contains(stderr, "vlm") {
		t.Fatalf("accepted a dependency on no service: %v\n%s", err, stderr)
	}
}

// composeService is what composeJSON reads of a service.
type composeService struct {
	Environment map[string]*string `json:"environment"`
	Ports       []struct {
		HostIP string `json:"host_ip"`
		Target int    `json:"target"`
	} `json:"ports"`
}

// composeJSON is `docker compose config --format json` of file with only
// env set.
func composeJSON(t *testing.T, bin, file string, env map[string]string, args ...string) struct {
	Services map[string]composeService `json:"services"`
} {
	t.Helper()
	envFile := filepath.Join(t.TempDir(), "env")
	if err := os.WriteFile(envFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"--env-file", envFile, "-f", file}, append(args, "config", "--format", "json")...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("docker compose config: %v\n%s", err, stderr.String())
	}
	var cfg struct {
		Services map[string]composeService `json:"services"`
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func merge(maps ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// TestNATSPayload: the servers in compose (the single one, and the cluster
// profile's nodes) accept the largest envelope the streams store (their
// default max_payload, 1 MiB, is below it).
func TestNATSPayload(t *testing.T) {
	for _, u := range natsauth.Users() { // the nats services' entrypoint sets them from the secret files
		t.Setenv(natsauth.PasswordVar(u.Name), "x")
	}
	t.Setenv("HOSTNAME", "nats-1") // a cluster node's server name
	for _, conf := range []string{"nats.conf", filepath.Join("nats", "cluster.conf")} {
		opts, err := server.ProcessConfigFile(filepath.Join(repoRoot(t), "deploy", conf))
		if err != nil {
			t.Fatal(err)
		}
		var largest int32
		for _, sc := range bus.StreamConfigs(bus.StreamsConfig{}) {
			largest = max(largest, sc.MaxMsgSize)
		}
		if largest <= 0 {
			t.Fatal("the streams have no message size limit: max_payload cannot be checked against it")
		}
		if opts.MaxPayload < largest {
			t.Fatalf("deploy/%s max_payload %d is below the streams' MaxMsgSize %d", conf, opts.MaxPayload, largest)
		}
		if !opts.JetStream || opts.StoreDir != "/data" {
			t.Fatalf("deploy/%s: JetStream %v in %q; want it on, in the data volume (/data)", conf, opts.JetStream, opts.StoreDir)
		}
	}
}
