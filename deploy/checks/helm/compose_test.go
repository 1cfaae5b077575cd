package helm

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// composeService is what the examples take from a docker-compose.yml
// service.
type composeService struct {
	Image       string            `json:"image"`
	Entrypoint  []string          `json:"entrypoint"`
	Command     []string          `json:"command"`
	Environment map[string]string `json:"environment"`
	Volumes     []string          `json:"volumes"`
	Healthcheck *struct {
		Test []string `json:"test"`
	} `json:"healthcheck"`
}

// readCompose decodes the named services of docker-compose.yml.
func readCompose(t *testing.T, names ...string) map[string]composeService {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Services map[string]json.RawMessage `json:"services"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	out := map[string]composeService{}
	for _, n := range names {
		raw, ok := c.Services[n]
		if !ok {
			t.Fatalf("docker-compose.yml has no service %s", n)
		}
		var s composeService
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("docker-compose.yml service %s: %v", n, err)
		}
		out[n] = s
	}
	return out
}

// composeValue is s as compose passes it: $$ is a $, ${NAME:-default}
// its default (the example has no .env). Any other interpolation is an
// error: the example would need a value compose gets from the operator.
func composeValue(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case strings.HasPrefix(s[i:], "$$"):
			b.WriteByte('$')
			i++
		case strings.HasPrefix(s[i:], "${"):
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return "", fmt.Errorf("%q: unterminated ${", s)
			}
			_, def, ok := strings.Cut(s[i+2:i+end], ":-")
			if !ok {
				return "", fmt.Errorf("%q: %s has no default", s, s[i:i+end+1])
			}
			b.WriteString(def)
			i += end
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}

func composeValues(t *testing.T, ss []string) []string {
	t.Helper()
	out := make([]string, len(ss))
	for i, s := range ss {
		v, err := composeValue(s)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = v
	}
	return out
}

// operatorVar matches a compose value that is only the operator's
// variable, empty by default (HF_TOKEN: ${HF_TOKEN:-}): in Kubernetes an
// optional Secret key.
var operatorVar = regexp.MustCompile(`^\$\{[A-Za-z_][A-Za-z0-9_]*:-\}$`)

// k8sReference matches what kubelet expands in a command, argument or
// variable: $(NAME).
var k8sReference = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// checkAsCompose: the pod's container named name runs as compose's
// service: image, entrypoint (command), command (args), environment,
// volumes (each compose volume a PVC of that name at the same path), and
// its healthcheck as the readiness probe.
func checkAsCompose(t *testing.T, name string, c composeService, pod corev1.PodSpec) {
	t.Helper()
	ct, ok := containerNamed(pod, name)
	if !ok {
		t.Errorf("%s: no container %s", name, name)
		return
	}
	if ct.Image != c.Image {
		t.Errorf("%s: image %s, docker-compose.yml runs %s", name, ct.Image, c.Image)
	}
	if want := composeValues(t, c.Entrypoint); !slices.Equal(ct.Command, want) {
		t.Errorf("%s: command %q, docker-compose.yml's entrypoint is %q", name, ct.Command, want)
	}
	if want := composeValues(t, c.Command); !slices.Equal(ct.Args, want) {
		t.Errorf("%s: args %q, docker-compose.yml's command is %q", name, ct.Args, want)
	}
	names := map[string]bool{}
	for _, e := range ct.Env {
		names[e.Name] = true
		raw, ok := c.Environment[e.Name]
		if !ok {
			t.Errorf("%s: %s, which docker-compose.yml does not set", name, e.Name)
			continue
		}
		if operatorVar.MatchString(raw) {
			if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Optional == nil || !*e.ValueFrom.SecretKeyRef.Optional {
				t.Errorf("%s: %s is the operator's (%s in docker-compose.yml): want an optional Secret key", name, e.Name, raw)
			}
			continue
		}
		if want, err := composeValue(raw); err != nil || e.Value != want || e.ValueFrom != nil {
			t.Errorf("%s: %s=%q, docker-compose.yml sets %q (%v)", name, e.Name, e.Value, want, err)
		}
	}
	for k := range c.Environment {
		if !names[k] {
			t.Errorf("%s: %s is not set; docker-compose.yml sets it", name, k)
		}
	}
	for _, vol := range c.Volumes {
		parts := strings.Split(vol, ":")
		if len(parts) < 2 {
			t.Errorf("%s: compose volume %q", name, vol)
			continue
		}
		ok := slices.ContainsFunc(ct.VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.MountPath == parts[1] && slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool {
				return v.Name == m.Name && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == parts[0]
			})
		})
		if !ok {
			t.Errorf("%s: no PVC %s mounted at %s, as docker-compose.yml's volume", name, parts[0], parts[1])
		}
	}
	if h := c.Healthcheck; h != nil && len(h.Test) > 1 {
		p := ct.ReadinessProbe
		switch h.Test[0] {
		case "CMD":
			u, err := url.Parse(h.Test[len(h.Test)-1])
			if err != nil || p == nil || p.HTTPGet == nil || p.HTTPGet.Path != u.Path || !slices.ContainsFunc(ct.Ports, func(cp corev1.ContainerPort) bool {
				return fmt.Sprint(cp.ContainerPort) == u.Port() && (cp.Name == p.HTTPGet.Port.String() || fmt.Sprint(cp.ContainerPort) == p.HTTPGet.Port.String())
			}) {
				t.Errorf("%s: readiness %+v, docker-compose.yml's healthcheck is %q", name, p, h.Test)
			}
		case "CMD-SHELL":
			want := []string{"/bin/sh", "-c", composeValues(t, h.Test[1:2])[0]}
			if p == nil || p.Exec == nil || !slices.Equal(p.Exec.Command, want) {
				t.Errorf("%s: readiness %+v, docker-compose.yml's healthcheck runs %q", name, p, want)
			}
		}
	}
	// kubelet turns $$ into $ and expands $(NAME) of the container's
	// variables in these: the shell would not get compose's text.
	for _, s := range append(append(slices.Clone(ct.Command), ct.Args...), envValues(ct)...) {
		if strings.Contains(s, "$$") {
			t.Errorf("%s: %q holds $$, which kubelet turns into $", name, s)
		}
		for _, m := range k8sReference.FindAllStringSubmatch(s, -1) {
			if names[m[1]] {
				t.Errorf("%s: %q: kubelet expands %s", name, s, m[0])
			}
		}
	}
}

func containerNamed(pod corev1.PodSpec, name string) (corev1.Container, bool) {
	for _, ct := range pod.Containers {
		if ct.Name == name {
			return ct, true
		}
	}
	return corev1.Container{}, false
}

func envValues(ct corev1.Container) []string {
	var vs []string
	for _, e := range ct.Env {
		vs = append(vs, e.Value)
	}
	return vs
}
