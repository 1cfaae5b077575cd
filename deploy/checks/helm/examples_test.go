package helm

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// example is one examples/*.yaml file of manifests (not chart values),
// decoded strictly.
type example struct {
	namespace   string
	deployments map[string]*appsv1.Deployment
	services    map[string]*corev1.Service
	configMaps  map[string]*corev1.ConfigMap
	claims      map[string]*corev1.PersistentVolumeClaim
	jobs        map[string]*batchv1.Job
	ingresses   []*networkingv1.Ingress
}

// loadExample decodes every document of files strictly, as one
// example: one Namespace, and every other object in it.
func loadExample(t *testing.T, files ...string) *example {
	t.Helper()
	e := &example{
		deployments: map[string]*appsv1.Deployment{},
		services:    map[string]*corev1.Service{},
		configMaps:  map[string]*corev1.ConfigMap{},
		claims:      map[string]*corev1.PersistentVolumeClaim{},
		jobs:        map[string]*batchv1.Job{},
	}
	var namespaced []string
	for _, file := range files {
		b, err := os.ReadFile(filepath.Join(chartDir, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range releaseutil.SplitManifests(string(b)) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			obj, gvk, err := strict.Decode([]byte(doc), nil, nil)
			if err != nil {
				t.Fatalf("%s: %v\n%s", file, err, doc)
			}
			meta, err := metaOf(obj)
			if err != nil {
				t.Fatal(err)
			}
			switch o := obj.(type) {
			case *corev1.Namespace:
				if e.namespace != "" {
					t.Errorf("%s: a second Namespace", file)
				}
				e.namespace = o.Name
				continue
			case *appsv1.Deployment:
				e.deployments[o.Name] = o
			case *corev1.Service:
				e.services[o.Name] = o
			case *corev1.ConfigMap:
				e.configMaps[o.Name] = o
			case *corev1.PersistentVolumeClaim:
				e.claims[o.Name] = o
			case *batchv1.Job:
				e.jobs[o.Name] = o
			case *networkingv1.Ingress:
				e.ingresses = append(e.ingresses, o)
			default:
				t.Errorf("%s: %s is a kind the example is not expected to hold", file, gvk)
			}
			namespaced = append(namespaced, file+": "+gvk.Kind+"/"+meta.GetName()+" in "+meta.GetNamespace())
			if meta.GetNamespace() == "" {
				t.Errorf("%s: %s %s has no namespace (kubectl apply would use the current one)", file, gvk.Kind, meta.GetName())
			}
		}
	}
	if e.namespace == "" {
		t.Fatalf("%v: no Namespace", files)
	}
	for _, n := range namespaced {
		if !strings.HasSuffix(n, " in "+e.namespace) {
			t.Errorf("%s, not in the example's Namespace %s", n, e.namespace)
		}
	}
	e.checkReferences(t, strings.Join(files, ", "))
	return e
}

// checkReferences: each Service selects the pods of exactly one
// Deployment, on ports they have; each volume's claim or ConfigMap is in
// the file; the Ingress backends are Services of the file.
func (e *example) checkReferences(t *testing.T, file string) {
	for _, svc := range e.services {
		var matched []*appsv1.Deployment
		for _, d := range e.deployments {
			if labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
				matched = append(matched, d)
			}
		}
		if len(svc.Spec.Selector) == 0 || len(matched) != 1 {
			t.Errorf("%s: Service %s selects %d Deployments' pods, want one", file, svc.Name, len(matched))
			continue
		}
		for _, p := range svc.Spec.Ports {
			if !containerHasPort(matched[0].Spec.Template.Spec.Containers[0], p.TargetPort.String()) {
				t.Errorf("%s: Service %s: targetPort %s is no port of %s", file, svc.Name, p.TargetPort.String(), matched[0].Name)
			}
		}
	}
	pods := map[string]corev1.PodSpec{}
	for _, d := range e.deployments {
		if !labels.SelectorFromSet(d.Spec.Selector.MatchLabels).Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("%s: Deployment %s does not select its pods", file, d.Name)
		}
		pods["Deployment "+d.Name] = d.Spec.Template.Spec
	}
	for _, j := range e.jobs {
		pods["Job "+j.Name] = j.Spec.Template.Spec
	}
	for where, pod := range pods {
		for _, v := range pod.Volumes {
			if c := v.PersistentVolumeClaim; c != nil && e.claims[c.ClaimName] == nil {
				t.Errorf("%s: %s: claim %s is not in the example", file, where, c.ClaimName)
			}
			if c := v.ConfigMap; c != nil && e.configMaps[c.Name] == nil {
				t.Errorf("%s: %s: ConfigMap %s is not in the example", file, where, c.Name)
			}
		}
		for _, ct := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
			if _, ok := ct.Resources.Limits[corev1.ResourceMemory]; !ok {
				t.Errorf("%s: %s/%s: no memory limit", file, where, ct.Name)
			}
			for _, m := range ct.VolumeMounts {
				if !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name }) {
					t.Errorf("%s: %s/%s: mount of undeclared volume %s", file, where, ct.Name, m.Name)
				}
			}
		}
	}
	for _, ing := range e.ingresses {
		for _, r := range ing.Spec.Rules {
			for _, p := range r.HTTP.Paths {
				svc := e.services[p.Backend.Service.Name]
				if svc == nil || !slices.ContainsFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool { return sp.Name == p.Backend.Service.Port.Name }) {
					t.Errorf("%s: Ingress %s: backend %+v is no Service port of the file", file, ing.Name, p.Backend.Service)
				}
			}
		}
	}
}

// serviceAt is the example's Service a cluster URL names
// (<service>.<namespace>.svc.cluster.local:<port>), with the port, or an
// error saying why none is.
func (e *example) serviceAt(raw string) (*corev1.Service, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	svcName, rest, _ := strings.Cut(u.Hostname(), ".")
	if rest != e.namespace+".svc.cluster.local" {
		return nil, fmt.Errorf("%s: not a Service of namespace %s", raw, e.namespace)
	}
	svc := e.services[svcName]
	if svc == nil {
		return nil, fmt.Errorf("%s: no Service %s in the example", raw, svcName)
	}
	port := u.Port()
	for _, p := range svc.Spec.Ports {
		if fmt.Sprint(p.Port) == port {
			return svc, nil
		}
	}
	return nil, fmt.Errorf("%s: Service %s has no port %s", raw, svcName, port)
}

// container is the Deployment's container named after it.
func container(t *testing.T, d *appsv1.Deployment) corev1.Container {
	t.Helper()
	ct, ok := containerNamed(d.Spec.Template.Spec, d.Name)
	if !ok {
		t.Fatalf("Deployment %s: no container %s", d.Name, d.Name)
	}
	return ct
}

func envVar(ct corev1.Container, name string) (corev1.EnvVar, bool) {
	for _, e := range ct.Env {
		if e.Name == name {
			return e, true
		}
	}
	return corev1.EnvVar{}, false
}

// flagValue is the value after flag in args.
func flagValue(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// TestExampleModels: examples/models-download.yaml and models.yaml run
// the download jobs and the model servers as docker-compose.yml does, the
// servers on a GPU each, the downloads fetch the commits the servers load,
// and the chart's default model URLs and ids are what the servers serve.
func TestExampleModels(t *testing.T) {
	e := loadExample(t, "examples/models-download.yaml", "examples/models.yaml")
	servers := []string{"vllm", "embeddings", "speaches"}
	downloads := []string{"download-vllm", "download-speaches"}
	compose := readCompose(t, append(slices.Clone(servers), downloads...)...)
	for _, name := range downloads {
		j := e.jobs[name]
		if j == nil {
			t.Errorf("no Job %s", name)
			continue
		}
		checkAsCompose(t, name, compose[name], j.Spec.Template.Spec)
	}
	fetched := map[string]string{} // repo → commit, as the Jobs fetch them
	for _, j := range e.jobs {
		for _, ct := range j.Spec.Template.Spec.Containers {
			if v, ok := envVar(ct, "MODELS"); ok {
				for _, spec := range strings.Fields(v.Value) {
					repo, rev, _ := strings.Cut(spec, "@")
					fetched[repo] = rev
				}
			}
		}
	}

	served := map[string][]string{} // Deployment → model ids
	for _, name := range servers {
		d := e.deployments[name]
		if d == nil {
			t.Errorf("no Deployment %s", name)
			continue
		}
		checkAsCompose(t, name, compose[name], d.Spec.Template.Spec)
		ct := container(t, d)
		if gpu := ct.Resources.Limits["nvidia.com/gpu"]; gpu.Value() != 1 {
			t.Errorf("%s: nvidia.com/gpu limit %s, want 1", name, gpu.String())
		}
		for kind, p := range map[string]*corev1.Probe{"startup": ct.StartupProbe, "liveness": ct.LivenessProbe} {
			if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/health" || !containerHasPort(ct, p.HTTPGet.Port.String()) {
				t.Errorf("%s: %s probe %+v, want GET /health on its port", name, kind, p)
			}
		}
		// Twenty minutes to the first answer, as compose's start_period.
		if p := ct.StartupProbe; p != nil && p.PeriodSeconds*p.FailureThreshold < 20*60 {
			t.Errorf("%s: the startup probe gives up after %d s, before compose's 20 minutes", name, p.PeriodSeconds*p.FailureThreshold)
		}
		if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
			t.Errorf("%s: strategy %q: a rolling update needs a second GPU and the ReadWriteOnce volumes", name, d.Spec.Strategy.Type)
		}
		if m := flagValue(ct.Args, "--model"); m != "" {
			served[name] = []string{m}
			if rev, ok := fetched[m]; !ok || rev != flagValue(ct.Args, "--revision") {
				t.Errorf("%s: serves %s at %q, the download Jobs fetch %q (%v)", name, m, flagValue(ct.Args, "--revision"), rev, ok)
			}
		}
		if v, ok := envVar(ct, "LOAD_MODELS"); ok {
			served[name] = strings.Fields(v.Value)
			for _, m := range served[name] {
				if _, ok := fetched[m]; !ok {
					t.Errorf("%s: loads %s, which no download Job fetches", name, m)
				}
			}
		}
	}
	// The two vLLM servers share ReadWriteOnce volumes: one node.
	if d := e.deployments["embeddings"]; d != nil {
		a := d.Spec.Template.Spec.Affinity
		if a == nil || a.PodAffinity == nil || len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 ||
			a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey != "kubernetes.io/hostname" ||
			a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].LabelSelector.MatchLabels["app.kubernetes.io/name"] != "vllm" {
			t.Error("embeddings: not required on vllm's node, though the two share ReadWriteOnce volumes")
		}
	}

	// The chart's defaults: each engine's URL names a Service of the
	// example, and the server behind it serves the engine's model.
	r := decode(t, mustRender(t, map[string]any{}))
	gw := r.deployments["gateway"].Spec.Template.Spec.Containers[0]
	for _, engine := range []string{"LLM", "EMBEDDING", "ASR", "TTS"} {
		u, _ := envValue(gw, "ALICIA_"+engine+"_URL")
		model, _ := envValue(gw, "ALICIA_"+engine+"_MODEL")
		svc, err := e.serviceAt(u)
		if err != nil {
			t.Errorf("models.%s.url: %v", strings.ToLower(engine), err)
			continue
		}
		var server string
		for name, d := range e.deployments {
			if labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
				server = name
			}
		}
		if !slices.Contains(served[server], model) {
			t.Errorf("%s: the chart asks %s for model %s; it serves %v", engine, server, model, served[server])
		}
	}
}

// TestExampleLiveKit: examples/livekit.yaml runs compose's livekit-server
// on the node's network, advertising the node's address, its ICE ports
// those of deploy/livekit.yaml (which compose publishes), with the key and
// secret of the chart's Secret; the chart's default livekit.url names its
// Service.
func TestExampleLiveKit(t *testing.T) {
	e := loadExample(t, "examples/livekit.yaml")
	d := e.deployments["livekit-server"]
	if d == nil {
		t.Fatal("no Deployment livekit-server")
	}
	ct := container(t, d)
	if img := readCompose(t, "livekit")["livekit"].Image; ct.Image != img {
		t.Errorf("image %s, docker-compose.yml runs %s", ct.Image, img)
	}
	pod := d.Spec.Template.Spec
	if !pod.HostNetwork || pod.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("hostNetwork %v, dnsPolicy %s: media needs the node's network, and the pod cluster DNS", pod.HostNetwork, pod.DNSPolicy)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Error("want one replica (no Redis), replaced with Recreate (the node's ports)")
	}
	if v, ok := envVar(ct, "NODE_IP"); !ok || v.ValueFrom == nil || v.ValueFrom.FieldRef == nil || v.ValueFrom.FieldRef.FieldPath != "status.hostIP" {
		t.Error("NODE_IP is not the node's address (status.hostIP)")
	}

	// The key and secret: the Secret the chart's pods read, same keys.
	chartVals := readValues(t, "values.yaml")
	secret := dig(t, chartVals, "livekit", "secretName").(string)
	keys := dig(t, chartVals, "livekit", "keys").(map[string]any)
	want := map[string]string{"LIVEKIT_API_KEY": keys["apiKey"].(string), "LIVEKIT_API_SECRET": keys["apiSecret"].(string)}
	for name, key := range want {
		v, ok := envVar(ct, name)
		if !ok || v.ValueFrom == nil || v.ValueFrom.SecretKeyRef == nil || v.ValueFrom.SecretKeyRef.Name != secret || v.ValueFrom.SecretKeyRef.Key != key {
			t.Errorf("%s: %+v, want key %s of Secret %s", name, v.ValueFrom, key, secret)
		}
	}
	if v, _ := envVar(ct, "LIVEKIT_KEYS"); v.Value != "$(LIVEKIT_API_KEY): $(LIVEKIT_API_SECRET)" {
		t.Errorf("LIVEKIT_KEYS=%q, want the key and secret above", v.Value)
	}

	// Its configuration: the config file it is given, the ports.
	var cfg struct {
		Port int `json:"port"`
		RTC  struct {
			TCPPort       int   `json:"tcp_port"`
			UDPPort       int   `json:"udp_port"`
			UseExternalIP *bool `json:"use_external_ip"`
		} `json:"rtc"`
	}
	cfgPath := flagValue(ct.Args, "--config")
	var found bool
	for _, m := range ct.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name != m.Name || v.ConfigMap == nil || e.configMaps[v.ConfigMap.Name] == nil {
				continue
			}
			for key, text := range e.configMaps[v.ConfigMap.Name].Data {
				if filepath.Join(m.MountPath, key) == cfgPath {
					found = true
					if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
						t.Fatalf("%s: %v", cfgPath, err)
					}
				}
			}
		}
	}
	if !found {
		t.Fatalf("--config %s is no file of a mounted ConfigMap", cfgPath)
	}
	var compose struct {
		RTC struct {
			TCPPort int `json:"tcp_port"`
			UDPPort int `json:"udp_port"`
		} `json:"rtc"`
	}
	b, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "livekit.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &compose); err != nil {
		t.Fatal(err)
	}
	if cfg.RTC.TCPPort != compose.RTC.TCPPort || cfg.RTC.UDPPort != compose.RTC.UDPPort {
		t.Errorf("ICE ports %d/tcp %d/udp, deploy/livekit.yaml's %d/tcp %d/udp", cfg.RTC.TCPPort, cfg.RTC.UDPPort, compose.RTC.TCPPort, compose.RTC.UDPPort)
	}
	if cfg.RTC.UseExternalIP == nil || *cfg.RTC.UseExternalIP {
		t.Error("rtc.use_external_ip is not false: NODE_IP would not be advertised as given")
	}
	for port, proto := range map[int]corev1.Protocol{cfg.Port: corev1.ProtocolTCP, cfg.RTC.TCPPort: corev1.ProtocolTCP, cfg.RTC.UDPPort: corev1.ProtocolUDP} {
		if !slices.ContainsFunc(ct.Ports, func(p corev1.ContainerPort) bool { return int(p.ContainerPort) == port && p.Protocol == proto }) {
			t.Errorf("port %d/%s is not a container port", port, proto)
		}
	}

	// The chart's default URL names its Service, on the signalling port.
	r := decode(t, mustRender(t, map[string]any{}))
	u, _ := envValue(r.deployments["room-agent"].Spec.Template.Spec.Containers[0], "ALICIA_LIVEKIT_URL")
	svc, err := e.serviceAt(u)
	if err != nil {
		t.Fatalf("livekit.url: %v", err)
	}
	pu, _ := url.Parse(u)
	for _, p := range svc.Spec.Ports {
		if fmt.Sprint(p.Port) != pu.Port() {
			continue
		}
		if !slices.ContainsFunc(ct.Ports, func(cp corev1.ContainerPort) bool {
			return (cp.Name == p.TargetPort.String() || fmt.Sprint(cp.ContainerPort) == p.TargetPort.String()) && int(cp.ContainerPort) == cfg.Port
		}) {
			t.Errorf("livekit.url %s: Service port %d → %s, not LiveKit's signalling port %d", u, p.Port, p.TargetPort.String(), cfg.Port)
		}
	}
}
