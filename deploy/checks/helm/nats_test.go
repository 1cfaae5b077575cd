package helm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"testing"

	"github.com/nats-io/nats-server/v2/conf"
)

// The example values for the official nats chart (README, NATS): the
// hand-written one, then the users generated from pkg/natsauth.
var natsValueFiles = []string{"examples/nats-values.yaml", "examples/nats-auth-values.yaml"}

// rawValue is the nats chart's rule for a string value "<< x >>": written
// into nats.conf as x, unquoted (its nats.formatConfig).
var rawValue = regexp.MustCompile(`"<<\s+(.*?)\s+>>"`)

// natsConf is what the nats chart writes into nats.conf for a config
// block's merge values: their JSON, with the << >> values unquoted.
func natsConf(t *testing.T, merge any) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(merge); err != nil {
		t.Fatal(err)
	}
	return rawValue.ReplaceAllString(b.String(), "${1}")
}

// TestNATSValues: nats-server reads, from what the nats chart makes of
// the example values, the same users and permissions as from
// deploy/nats.conf (which pkg/natsauth's TestDeployConf keeps equal to the
// table), each password from the key of the Alicia chart's NATS Secret
// that the service's pod mounts; and the same max_payload and fsync.
func TestNATSValues(t *testing.T) {
	vals := map[string]any{}
	for _, f := range natsValueFiles {
		vals = mergeMaps(vals, readValues(t, f))
	}
	chartVals := readValues(t, "values.yaml")
	secret := dig(t, chartVals, "nats", "auth", "secretName").(string)

	// The nats container's environment: each password from the Secret.
	env, _ := dig(t, vals, "container", "env").(map[string]any)
	if len(env) == 0 {
		t.Fatal("container.env sets no password")
	}
	for name, v := range env {
		ref, ok := digOK(v, "valueFrom", "secretKeyRef")
		if !ok {
			t.Errorf("container.env %s: not from a Secret (a password is never a value)", name)
			continue
		}
		m := ref.(map[string]any)
		if m["name"] != secret {
			t.Errorf("container.env %s: Secret %v, want the chart's nats.auth.secretName %s", name, m["name"], secret)
		}
		key, _ := m["key"].(string)
		t.Setenv(name, "pw-"+key)
	}

	merge := dig(t, vals, "config", "merge")
	got, err := conf.Parse(natsConf(t, merge))
	if err != nil {
		t.Fatalf("nats-server cannot read what the chart writes: %v\n%s", err, natsConf(t, merge))
	}
	deployConf, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "nats.conf"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := conf.Parse(string(deployConf))
	if err != nil {
		t.Fatalf("deploy/nats.conf: %v", err)
	}
	if !reflect.DeepEqual(got["authorization"], want["authorization"]) {
		t.Errorf("the chart's authorization differs from deploy/nats.conf's: run go test ./pkg/natsauth -run TestHelmValues -update")
	}
	if got["max_payload"] != want["max_payload"] {
		t.Errorf("max_payload %v, deploy/nats.conf %v", got["max_payload"], want["max_payload"])
	}
	js := dig(t, vals, "config", "jetstream", "merge").(map[string]any)
	if js["sync_interval"] != want["jetstream"].(map[string]any)["sync_interval"] {
		t.Errorf("jetstream sync_interval %v, deploy/nats.conf %v", js["sync_interval"], want["jetstream"].(map[string]any)["sync_interval"])
	}

	// Each user's password is the Secret's key named after the user, the
	// key its service's pod mounts (the Alicia chart's natsConfig).
	users := map[string]bool{}
	for _, u := range got["authorization"].(map[string]any)["users"].([]any) {
		m := u.(map[string]any)
		name := m["user"].(string)
		users[name] = true
		if m["password"] != "pw-"+name {
			t.Errorf("user %s: password from key %q of the Secret, want %q", name, m["password"], name)
		}
	}
	r := decode(t, mustRender(t, map[string]any{}))
	for comp, d := range r.deployments {
		ct := d.Spec.Template.Spec.Containers[0]
		user, ok := envValue(ct, "ALICIA_NATS_USER")
		if !ok || !users[user] {
			t.Errorf("%s: NATS user %q is not in the nats chart's users", comp, user)
		}
		var key string
		for _, v := range d.Spec.Template.Spec.Volumes {
			for file, src := range secretFilesOf(v) {
				if file == "nats-password" {
					key = src
				}
			}
		}
		if key != secret+"/"+user {
			t.Errorf("%s: NATS password from %s, want %s/%s, the key the nats chart reads user %s's from", comp, key, secret, user, user)
		}
	}

	// The server compose runs and the tests embed.
	if tag, img := dig(t, vals, "container", "image", "tag"), readCompose(t, "nats")["nats"].Image; "nats:"+fmt.Sprint(tag) != img {
		t.Errorf("container.image.tag %v; docker-compose.yml runs %s", tag, img)
	}

	// JetStream at R<global.streamReplicas> needs that many servers.
	replicas := dig(t, chartVals, "global", "streamReplicas").(float64)
	cluster := dig(t, vals, "config", "cluster").(map[string]any)
	if cluster["enabled"] != true || cluster["replicas"].(float64) < replicas {
		t.Errorf("config.cluster %v: want enabled with at least %v servers (global.streamReplicas)", cluster, replicas)
	}
}

// TestNATSConfRaw: the << >> rule gives nats-server a variable, not the
// string "$NATS_PASSWORD_…", and keeps $JS subjects quoted (else read as
// variables).
func TestNATSConfRaw(t *testing.T) {
	t.Setenv("NATS_PASSWORD_X", "secret")
	c, err := conf.Parse(natsConf(t, map[string]any{
		"authorization": map[string]any{"users": []any{map[string]any{
			"user": "x", "password": "<< $NATS_PASSWORD_X >>",
			"permissions": map[string]any{"publish": map[string]any{"allow": []any{"$JS.API.INFO"}}},
		}}},
		"max_payload": "<< 2MB >>",
	}))
	if err != nil {
		t.Fatal(err)
	}
	u := c["authorization"].(map[string]any)["users"].([]any)[0].(map[string]any)
	allow := u["permissions"].(map[string]any)["publish"].(map[string]any)["allow"].([]any)
	if u["password"] != "secret" || allow[0] != "$JS.API.INFO" || c["max_payload"] != int64(2<<20) {
		t.Errorf("read %v, max_payload %v", u, c["max_payload"])
	}
}

// mustRender renders the chart with vals as release alicia.
func mustRender(t *testing.T, vals map[string]any) map[string]string {
	t.Helper()
	out, err := render(loadChart(t), vals)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return out
}

// dig is the value at path in nested maps; a missing one fails the test.
func dig(t *testing.T, v any, path ...string) any {
	t.Helper()
	got, ok := digOK(v, path...)
	if !ok {
		t.Fatalf("no %v", path)
	}
	return got
}

func digOK(v any, path ...string) (any, bool) {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[p]; !ok {
			return nil, false
		}
	}
	return v, true
}

// mergeMaps merges b into a as `helm install -f a -f b` does (helm's
// pkg/cli/values): maps merge, anything else in b replaces a's.
func mergeMaps(a, b map[string]any) map[string]any {
	out := make(map[string]any, len(a))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		if bm, ok := v.(map[string]any); ok {
			if am, ok := out[k].(map[string]any); ok {
				out[k] = mergeMaps(am, bm)
				continue
			}
		}
		out[k] = v
	}
	return out
}
