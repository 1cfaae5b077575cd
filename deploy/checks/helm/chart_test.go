package helm

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/scheme"
)

const (
	chartDir  = "../../helm/alicia"
	repoRoot  = "../../.."
	namespace = "alicia"
	release   = "alicia"
	// The Kubernetes version the chart is rendered for (Capabilities).
	kubeVersion = "v1.33.0"
)

// The values files the chart is rendered with: the defaults, and the
// files under ci/ (see each file's comment).
var cases = []struct{ name, file string }{
	{"default", ""},
	{"ingress-tls-hpa", "ci/ingress-tls-hpa-values.yaml"},
	{"minimal", "ci/minimal-values.yaml"},
}

// The Alicia services the chart deploys, by component label, with the
// source directory whose configuration they read.
var services = map[string]string{
	"gateway":     "services/gateway",
	"persistence": "services/persistence",
	"llm":         "services/llm",
	"memory":      "services/memory",
	"asr":         "services/asr",
	"tts":         "services/tts",
	"room-agent":  "services/room-agent",
	"migrate":     "services/cli",
}

// strict decodes YAML into the registered Go types of the Kubernetes API,
// failing on unknown and duplicate fields.
var strict = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
	kjson.SerializerOptions{Yaml: true, Strict: true})

// rendered is one values file's manifests, decoded.
type rendered struct {
	notes        string
	objects      []runtime.Object
	deployments  map[string]*appsv1.Deployment // by component
	services     map[string]*corev1.Service
	pdbs         map[string]*policyv1.PodDisruptionBudget
	hpas         []*autoscalingv2.HorizontalPodAutoscaler
	ingresses    []*networkingv1.Ingress
	jobs         []*batchv1.Job
	accounts     []*corev1.ServiceAccount
	manifestText string
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	if len(ch.Metadata.Dependencies) > 0 {
		t.Fatalf("the chart has dependencies %v: it must render with no chart repository", ch.Metadata.Dependencies)
	}
	return ch
}

func readValues(t *testing.T, file string) map[string]any {
	t.Helper()
	if file == "" {
		return map[string]any{}
	}
	v, err := chartutil.ReadValuesFile(filepath.Join(chartDir, file))
	if err != nil {
		t.Fatalf("values %s: %v", file, err)
	}
	return v.AsMap()
}

// render renders the chart with vals as `helm template` does (hooks
// included), in memory, as release alicia in namespace alicia.
func render(ch *chart.Chart, vals map[string]any) (map[string]string, error) {
	return renderAs(ch, vals, release, namespace)
}

// renderAs renders the chart as release name in namespace ns.
func renderAs(ch *chart.Chart, vals map[string]any, name, ns string) (map[string]string, error) {
	caps := chartutil.DefaultCapabilities.Copy()
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		return nil, err
	}
	caps.KubeVersion = *kv
	if err := chartutil.ProcessDependenciesWithMerge(ch, vals); err != nil {
		return nil, err
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{
		Name: name, Namespace: ns, Revision: 1, IsInstall: true,
	}, caps)
	if err != nil {
		return nil, err
	}
	return engine.Render(ch, rv)
}

// decode splits every rendered template into documents and decodes each
// strictly.
func decode(t *testing.T, out map[string]string) *rendered {
	t.Helper()
	r := &rendered{
		deployments: map[string]*appsv1.Deployment{},
		services:    map[string]*corev1.Service{},
		pdbs:        map[string]*policyv1.PodDisruptionBudget{},
	}
	names := make([]string, 0, len(out))
	for name := range out {
		names = append(names, name)
	}
	sort.Strings(names)
	seen := map[string]bool{}
	for _, name := range names {
		content := out[name]
		base := path.Base(name)
		switch {
		case base == "NOTES.txt":
			r.notes = content
			continue
		case strings.HasPrefix(base, "_"):
			continue
		}
		r.manifestText += content
		for _, doc := range releaseutil.SplitManifests(content) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			obj, gvk, err := strict.Decode([]byte(doc), nil, nil)
			if err != nil {
				t.Errorf("%s: %v\n%s", name, err, doc)
				continue
			}
			meta, err := metaOf(obj)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			key := gvk.Kind + "/" + meta.GetName()
			if seen[key] {
				t.Errorf("%s: %s rendered twice", name, key)
			}
			seen[key] = true
			if errs := validation.IsDNS1123Subdomain(meta.GetName()); len(errs) > 0 {
				t.Errorf("%s: name %q: %v", key, meta.GetName(), errs)
			}
			if meta.GetNamespace() != "" {
				t.Errorf("%s: sets its namespace; the release's is used", key)
			}
			r.objects = append(r.objects, obj)
			component := meta.GetLabels()["app.kubernetes.io/component"]
			switch o := obj.(type) {
			case *appsv1.Deployment:
				r.deployments[component] = o
			case *corev1.Service:
				r.services[component] = o
			case *policyv1.PodDisruptionBudget:
				r.pdbs[component] = o
			case *autoscalingv2.HorizontalPodAutoscaler:
				r.hpas = append(r.hpas, o)
			case *networkingv1.Ingress:
				r.ingresses = append(r.ingresses, o)
			case *batchv1.Job:
				r.jobs = append(r.jobs, o)
			case *corev1.ServiceAccount:
				r.accounts = append(r.accounts, o)
			default:
				t.Errorf("%s: %s is a kind the chart is not expected to render", name, gvk)
			}
		}
	}
	return r
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func metaOf(obj runtime.Object) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no object metadata", obj)
	}
	return m, nil
}

// TestStrictDecoding makes sure the decoder used below does refuse what
// the API server would: unknown fields, unknown kinds, a wrongly typed
// field.
func TestStrictDecoding(t *testing.T) {
	bad := map[string]string{
		"unknown field": "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec:\n  ports: [{port: 80, targetPrt: 8080}]\n",
		"unknown kind":  "apiVersion: v1\nkind: Servicee\nmetadata: {name: a}\n",
		"unknown group": "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: a}\n",
		"wrong type":    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\nspec: {replicas: two}\n",
		"duplicate":     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {x: a, x: b}\n",
	}
	for name, doc := range bad {
		if _, _, err := strict.Decode([]byte(doc), nil, nil); err == nil {
			t.Errorf("%s: decoded without an error", name)
		}
	}
	if _, _, err := strict.Decode([]byte("apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec:\n  ports: [{port: 80}]\n"), nil, nil); err != nil {
		t.Errorf("a valid Service: %v", err)
	}
}

// TestLint runs `helm lint` (its SDK) on the chart with each values file:
// no error, and no warning.
func TestLint(t *testing.T) {
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := lint.AllWithKubeVersion(chartDir, readValues(t, c.file), namespace, kv)
			for _, m := range l.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("helm lint: %s", m)
				} else {
					t.Logf("helm lint: %s", m)
				}
			}
		})
	}
}

// TestRender renders the chart with each values file and checks what it
// promises.
func TestRender(t *testing.T) {
	ch := loadChart(t)
	sources := readSources(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vals := readValues(t, c.file)
			out, err := render(ch, vals)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			r := decode(t, out)
			if strings.TrimSpace(r.notes) == "" {
				t.Error("NOTES.txt renders empty")
			}
			checkDeployments(t, r)
			checkServices(t, r)
			checkPDBs(t, r)
			checkHPAs(t, r)
			checkIngresses(t, r)
			checkServiceAccounts(t, r)
			checkVariables(t, r, sources)
			checkCase(t, c.name, r)
		})
	}
}

// The pod templates to check: every Deployment's and the migrate Job's.
func podTemplates(r *rendered) map[string]*corev1.PodTemplateSpec {
	pods := map[string]*corev1.PodTemplateSpec{}
	for comp, d := range r.deployments {
		pods["Deployment "+comp] = &d.Spec.Template
	}
	for _, j := range r.jobs {
		pods["Job "+j.Name] = &j.Spec.Template
	}
	return pods
}

func checkDeployments(t *testing.T, r *rendered) {
	if len(r.deployments) == 0 {
		t.Fatal("no Deployment rendered")
	}
	for comp := range r.deployments {
		if _, ok := services[comp]; !ok {
			t.Errorf("Deployment of unknown component %q", comp)
		}
	}
	for comp, d := range r.deployments {
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || sel.Empty() {
			t.Errorf("Deployment %s: selector %v: %v", comp, d.Spec.Selector, err)
		} else if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("Deployment %s: selector %v does not select its pods %v", comp, d.Spec.Selector, d.Spec.Template.Labels)
		}
		for _, ct := range d.Spec.Template.Spec.Containers {
			where := fmt.Sprintf("Deployment %s container %s", comp, ct.Name)
			if ct.LivenessProbe == nil || ct.ReadinessProbe == nil {
				t.Errorf("%s: liveness and readiness probes wanted", where)
			}
			for kind, p := range map[string]*corev1.Probe{"liveness": ct.LivenessProbe, "readiness": ct.ReadinessProbe, "startup": ct.StartupProbe} {
				if p == nil {
					continue
				}
				if p.HTTPGet == nil {
					t.Errorf("%s: %s probe is not an HTTP GET", where, kind)
					continue
				}
				if !containerHasPort(ct, p.HTTPGet.Port.String()) {
					t.Errorf("%s: %s probe port %s is not a container port", where, kind, p.HTTPGet.Port.String())
				}
				want := probePaths[comp].live
				if kind == "readiness" {
					want = probePaths[comp].ready
				}
				if p.HTTPGet.Path != want {
					t.Errorf("%s: %s probe path %s, want %s", where, kind, p.HTTPGet.Path, want)
				}
			}
			for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if _, ok := ct.Resources.Requests[res]; !ok {
					t.Errorf("%s: no %s request", where, res)
				}
			}
			if _, ok := ct.Resources.Limits[corev1.ResourceMemory]; !ok {
				t.Errorf("%s: no memory limit", where)
			}
		}
		if comp == "room-agent" {
			checkOneCore(t, d)
		}
	}
	for where, pod := range podTemplates(r) {
		checkPodSecurity(t, where, pod)
		checkSecretFiles(t, where, pod)
	}
}

func checkOneCore(t *testing.T, d *appsv1.Deployment) {
	one := resource.MustParse("1")
	for _, ct := range d.Spec.Template.Spec.Containers {
		req, lim := ct.Resources.Requests[corev1.ResourceCPU], ct.Resources.Limits[corev1.ResourceCPU]
		if req.Cmp(one) != 0 || lim.Cmp(one) != 0 {
			t.Errorf("room-agent: cpu request %s and limit %s, want exactly 1 each", req.String(), lim.String())
		}
		if v, ok := envValue(ct, "GOMAXPROCS"); !ok || v != "1" {
			t.Errorf("room-agent: GOMAXPROCS=%q, want 1", v)
		}
	}
}

func checkPodSecurity(t *testing.T, where string, pod *corev1.PodTemplateSpec) {
	ps := pod.Spec.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot {
		t.Errorf("%s: pod securityContext.runAsNonRoot wanted", where)
	}
	for _, ct := range pod.Spec.Containers {
		sc := ct.SecurityContext
		switch {
		case sc == nil:
			t.Errorf("%s/%s: no securityContext", where, ct.Name)
			continue
		case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
			t.Errorf("%s/%s: runAsNonRoot wanted", where, ct.Name)
		case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
			t.Errorf("%s/%s: readOnlyRootFilesystem wanted", where, ct.Name)
		case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
			t.Errorf("%s/%s: allowPrivilegeEscalation false wanted", where, ct.Name)
		case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL"):
			t.Errorf("%s/%s: capabilities.drop [ALL] wanted", where, ct.Name)
		}
	}
}

// checkSecretFiles: every *_FILE variable names a file a secret volume
// mounted in the container provides, and every such file is named by one.
func checkSecretFiles(t *testing.T, where string, pod *corev1.PodTemplateSpec) {
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		vols[v.Name] = v
	}
	for _, ct := range pod.Spec.Containers {
		provided := map[string]string{} // file path → secret/key
		for _, m := range ct.VolumeMounts {
			v, ok := vols[m.Name]
			if !ok {
				t.Errorf("%s/%s: mount of undeclared volume %q", where, ct.Name, m.Name)
				continue
			}
			for file, src := range secretFilesOf(v) {
				provided[path.Join(m.MountPath, file)] = src
			}
		}
		named := map[string]bool{}
		for _, e := range ct.Env {
			if !strings.HasSuffix(e.Name, "_FILE") {
				continue
			}
			if e.ValueFrom != nil || !path.IsAbs(e.Value) {
				t.Errorf("%s/%s: %s=%q is not a file path", where, ct.Name, e.Name, e.Value)
				continue
			}
			if _, ok := provided[path.Clean(e.Value)]; !ok {
				t.Errorf("%s/%s: %s=%s: no mounted secret provides that file (mounted: %v)", where, ct.Name, e.Name, e.Value, sortedKeys(provided))
			}
			named[path.Clean(e.Value)] = true
		}
		for f, src := range provided {
			if !named[f] {
				t.Errorf("%s/%s: %s (%s) is mounted but no *_FILE variable names it", where, ct.Name, f, src)
			}
		}
	}
}

// secretFilesOf lists the files a secret or projected-secret volume
// provides (its items; a secret without items is not used by the chart).
func secretFilesOf(v corev1.Volume) map[string]string {
	files := map[string]string{}
	add := func(name string, items []corev1.KeyToPath) {
		for _, it := range items {
			files[it.Path] = name + "/" + it.Key
		}
	}
	switch {
	case v.Secret != nil:
		add(v.Secret.SecretName, v.Secret.Items)
	case v.Projected != nil:
		for _, s := range v.Projected.Sources {
			if s.Secret != nil {
				add(s.Secret.Name, s.Secret.Items)
			}
		}
	}
	return files
}

func checkServices(t *testing.T, r *rendered) {
	for comp, svc := range r.services {
		d, ok := r.deployments[comp]
		if !ok {
			t.Errorf("Service %s: no Deployment of its component", svc.Name)
			continue
		}
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		matched := 0
		for _, other := range r.deployments {
			if sel.Matches(labels.Set(other.Spec.Template.Labels)) {
				matched++
			}
		}
		if len(svc.Spec.Selector) == 0 || !sel.Matches(labels.Set(d.Spec.Template.Labels)) || matched != 1 {
			t.Errorf("Service %s: selector %v matches %d Deployments' pods, want exactly its own", svc.Name, svc.Spec.Selector, matched)
		}
		for _, p := range svc.Spec.Ports {
			found := false
			for _, ct := range d.Spec.Template.Spec.Containers {
				found = found || containerHasPort(ct, p.TargetPort.String())
			}
			if !found {
				t.Errorf("Service %s: targetPort %s is no port of its pods", svc.Name, p.TargetPort.String())
			}
		}
	}
	for comp := range r.deployments {
		if _, ok := r.services[comp]; !ok {
			t.Errorf("Deployment %s has no Service", comp)
		}
	}
}

func checkPDBs(t *testing.T, r *rendered) {
	scaled := map[string]int32{}
	for _, h := range r.hpas {
		for comp, d := range r.deployments {
			if d.Name == h.Spec.ScaleTargetRef.Name {
				scaled[comp] = *h.Spec.MinReplicas
			}
		}
	}
	for comp, pdb := range r.pdbs {
		d, ok := r.deployments[comp]
		if !ok {
			t.Errorf("PodDisruptionBudget %s: no Deployment of its component", pdb.Name)
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("PodDisruptionBudget %s: selector %v does not select its Deployment's pods", pdb.Name, pdb.Spec.Selector)
		}
	}
	for comp, d := range r.deployments {
		n := scaled[comp]
		if d.Spec.Replicas != nil {
			n = *d.Spec.Replicas
		}
		_, has := r.pdbs[comp]
		switch {
		case n > 1 && !has:
			t.Errorf("Deployment %s runs %d replicas without a PodDisruptionBudget", comp, n)
		case n <= 1 && has:
			t.Errorf("Deployment %s runs one replica but has a PodDisruptionBudget (it would block node drains)", comp)
		}
	}
}

func checkHPAs(t *testing.T, r *rendered) {
	for _, h := range r.hpas {
		ref := h.Spec.ScaleTargetRef
		var target *appsv1.Deployment
		for _, d := range r.deployments {
			if ref.Kind == "Deployment" && ref.APIVersion == "apps/v1" && ref.Name == d.Name {
				target = d
			}
		}
		if target == nil {
			t.Errorf("HPA %s: scales %s/%s %s, which is not rendered", h.Name, ref.APIVersion, ref.Kind, ref.Name)
			continue
		}
		if target.Spec.Replicas != nil {
			t.Errorf("HPA %s: its Deployment sets replicas, which every upgrade would reset", h.Name)
		}
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 1 || h.Spec.MaxReplicas < *h.Spec.MinReplicas {
			t.Errorf("HPA %s: replicas %v..%d", h.Name, h.Spec.MinReplicas, h.Spec.MaxReplicas)
		}
		if len(h.Spec.Metrics) == 0 {
			t.Errorf("HPA %s: no metric", h.Name)
		}
		for _, m := range h.Spec.Metrics {
			if m.Type != autoscalingv2.ExternalMetricSourceType || m.External == nil {
				t.Errorf("HPA %s: metric %v, want External", h.Name, m.Type)
				continue
			}
			if !strings.HasPrefix(m.External.Metric.Name, "alicia_") {
				t.Errorf("HPA %s: metric %q is none of Alicia's", h.Name, m.External.Metric.Name)
			}
			if m.External.Target.Type != autoscalingv2.AverageValueMetricType || m.External.Target.AverageValue == nil || m.External.Target.AverageValue.Sign() <= 0 {
				t.Errorf("HPA %s: metric %s: target %+v, want a positive AverageValue", h.Name, m.External.Metric.Name, m.External.Target)
			}
		}
	}
}

func checkIngresses(t *testing.T, r *rendered) {
	for _, ing := range r.ingresses {
		for _, rule := range ing.Spec.Rules {
			for _, p := range rule.HTTP.Paths {
				b := p.Backend.Service
				if b == nil {
					t.Errorf("Ingress %s: a path without a Service backend", ing.Name)
					continue
				}
				var svc *corev1.Service
				for _, s := range r.services {
					if s.Name == b.Name {
						svc = s
					}
				}
				if svc == nil {
					t.Errorf("Ingress %s: backend Service %s is not rendered", ing.Name, b.Name)
					continue
				}
				ok := false
				for _, sp := range svc.Spec.Ports {
					ok = ok || (b.Port.Name != "" && sp.Name == b.Port.Name) || (b.Port.Number != 0 && sp.Port == b.Port.Number)
				}
				if !ok {
					t.Errorf("Ingress %s: backend port %+v is not a port of Service %s", ing.Name, b.Port, svc.Name)
				}
			}
		}
	}
}

func checkServiceAccounts(t *testing.T, r *rendered) {
	names := map[string]bool{}
	for _, a := range r.accounts {
		names[a.Name] = true
	}
	for comp, d := range r.deployments {
		sa := d.Spec.Template.Spec.ServiceAccountName
		if !names[sa] && !(len(r.accounts) == 0 && sa == "default") {
			t.Errorf("Deployment %s: serviceAccountName %q is not rendered", comp, sa)
		}
	}
}

// sources are the non-test Go files of each service directory and of pkg/,
// as text: the configuration variables are read there.
type sources struct {
	pkg     string
	service map[string]string
}

func readSources(t *testing.T) sources {
	t.Helper()
	read := func(dir string) string {
		var b bytes.Buffer
		err := filepath.WalkDir(filepath.Join(repoRoot, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || d.Name() == "web") {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			data, err := os.ReadFile(p)
			b.Write(data)
			return err
		})
		if err != nil {
			t.Fatalf("read %s: %v", dir, err)
		}
		return b.String()
	}
	s := sources{pkg: read("pkg"), service: map[string]string{}}
	for comp, dir := range services {
		s.service[comp] = read(dir)
	}
	return s
}

var builtName = regexp.MustCompile(`^ALICIA_(LLM|ASR|TTS|EMBEDDING)_(URL|MODEL|API_KEY)$`)

// checkVariables: every ALICIA_* variable the chart sets is one the
// container's service reads (its name as a string in the service's or
// pkg/'s code; for X_FILE, X read through config.Secret), so a renamed or
// invented variable fails here.
func checkVariables(t *testing.T, r *rendered, src sources) {
	check := func(where, comp string, ct corev1.Container) {
		code := src.service[comp] + src.pkg
		for _, e := range ct.Env {
			name, isFile := strings.CutSuffix(e.Name, "_FILE")
			if !strings.HasPrefix(name, "ALICIA_") {
				if !slices.Contains([]string{"GOMAXPROCS", "GOMEMLIMIT"}, e.Name) {
					t.Errorf("%s: unexpected variable %s", where, e.Name)
				}
				continue
			}
			literal := strings.Contains(code, `"`+name+`"`)
			if !literal && comp == "gateway" && builtName.MatchString(name) {
				// engineFromEnv builds them: "ALICIA_"+prefix+"_URL".
				m := builtName.FindStringSubmatch(name)
				literal = strings.Contains(code, `"ALICIA_"+prefix+"_`+m[2]+`"`) && strings.Contains(code, `"`+m[1]+`"`)
			}
			if !literal {
				t.Errorf("%s: %s is not read by %s", where, name, services[comp])
				continue
			}
			if isFile && !regexp.MustCompile(`config\.Secret\(\s*("`+name+`"|"ALICIA_"\s*\+\s*prefix\s*\+\s*"_API_KEY"|Env\w+)`).MatchString(code) {
				t.Errorf("%s: %s: %s is not read as a secret (config.Secret), so %s does nothing", where, e.Name, name, e.Name)
			}
		}
	}
	for comp, d := range r.deployments {
		for _, ct := range d.Spec.Template.Spec.Containers {
			check("Deployment "+comp, comp, ct)
		}
	}
	for _, j := range r.jobs {
		for _, ct := range j.Spec.Template.Spec.Containers {
			check("Job "+j.Name, "migrate", ct)
		}
	}
}

// checkCase: what each values file is for.
func checkCase(t *testing.T, name string, r *rendered) {
	count := func(m int, want int, what string) {
		if m != want {
			t.Errorf("%d %s rendered, want %d", m, what, want)
		}
	}
	count(len(r.deployments), 7, "Deployments")
	count(len(r.services), 7, "Services")
	gw := r.deployments["gateway"]
	switch name {
	case "default":
		count(len(r.pdbs), 6, "PodDisruptionBudgets")
		count(len(r.hpas), 0, "HPAs")
		count(len(r.ingresses), 0, "Ingresses")
		count(len(r.jobs), 1, "Jobs")
		count(len(r.accounts), 1, "ServiceAccounts")
		wantEnv(t, r.deployments["persistence"], "ALICIA_PERSISTENCE_MIGRATE", "false")
		wantEnv(t, r.deployments["asr"], "ALICIA_NATS_USER", "asr")
		if _, ok := envValue(gw.Spec.Template.Spec.Containers[0], "ALICIA_COOKIE_SECURE"); ok {
			t.Error("gateway: ALICIA_COOKIE_SECURE set without TLS")
		}
		// Streams at R3 on every service (all of them ensure the streams,
		// so they must agree), not on the migrate Job.
		for _, comp := range sortedKeys(r.deployments) {
			wantEnv(t, r.deployments[comp], "ALICIA_STREAM_REPLICAS", "3")
		}
		for _, j := range r.jobs {
			if v, ok := envValue(j.Spec.Template.Spec.Containers[0], "ALICIA_STREAM_REPLICAS"); ok {
				t.Errorf("Job %s: ALICIA_STREAM_REPLICAS=%q, which the migrate command does not read", j.Name, v)
			}
		}
		// Retention and trusted proxies unset: the services' defaults
		// (forever, SYSTEM unbounded, no proxy trusted).
		for comp, d := range r.deployments {
			for _, name := range []string{"ALICIA_STREAM_MAX_AGE", "ALICIA_SYSTEM_MAX_BYTES", "ALICIA_CONVERSATIONS_MAX_BYTES", "ALICIA_TRUSTED_PROXIES"} {
				if v, ok := envValue(d.Spec.Template.Spec.Containers[0], name); ok {
					t.Errorf("%s: %s=%q set by default", comp, name, v)
				}
			}
		}
		if j := r.jobs[0]; j.Annotations["helm.sh/hook"] != "pre-install,pre-upgrade" {
			t.Errorf("migrate Job: hook %q", j.Annotations["helm.sh/hook"])
		}
	case "ingress-tls-hpa":
		count(len(r.hpas), 1, "HPAs")
		count(len(r.ingresses), 1, "Ingresses")
		if len(r.ingresses) == 1 && len(r.ingresses[0].Spec.TLS) == 0 {
			t.Error("Ingress without TLS")
		}
		wantEnv(t, gw, "ALICIA_COOKIE_SECURE", "true")
		// Retention on every service (each one ensures the streams), not
		// on the migrate Job; trusted proxies on the gateway alone.
		for _, comp := range sortedKeys(r.deployments) {
			d := r.deployments[comp]
			wantEnv(t, d, "ALICIA_CONVERSATIONS_MAX_BYTES", "8589934592")
			wantEnv(t, d, "ALICIA_STREAM_MAX_AGE", "2160h")
			wantEnv(t, d, "ALICIA_SYSTEM_MAX_BYTES", "268435456")
			if comp == "gateway" {
				wantEnv(t, d, "ALICIA_TRUSTED_PROXIES", "10.244.0.0/16,fd00:10:244::/56")
			} else if v, ok := envValue(d.Spec.Template.Spec.Containers[0], "ALICIA_TRUSTED_PROXIES"); ok {
				t.Errorf("%s: ALICIA_TRUSTED_PROXIES=%q, which only the gateway reads", comp, v)
			}
		}
		for _, j := range r.jobs {
			for _, name := range []string{"ALICIA_STREAM_MAX_AGE", "ALICIA_SYSTEM_MAX_BYTES", "ALICIA_TRUSTED_PROXIES"} {
				if v, ok := envValue(j.Spec.Template.Spec.Containers[0], name); ok {
					t.Errorf("Job %s: %s=%q, which the migrate command does not read", j.Name, name, v)
				}
			}
		}
		wantEnv(t, r.deployments["persistence"], "ALICIA_PERSISTENCE_SHARDS", "6")
		if p := r.deployments["persistence"]; p == nil || p.Spec.Replicas == nil || *p.Spec.Replicas != 3 {
			t.Error("persistence: not three replicas")
		}
		wantEnv(t, r.deployments["tts"], "ALICIA_TTS_MAX_TURNS", "128")
		wantEnv(t, r.deployments["memory"], "ALICIA_EMBEDDING_API_KEY_FILE", "/run/secrets/alicia/embedding-api-key")
		if r.deployments["asr"].Spec.Replicas != nil {
			t.Error("asr: replicas set next to its HPA")
		}
		if img := gw.Spec.Template.Spec.Containers[0].Image; img != "registry.example.com/alicia/alicia-gateway:2025.1" {
			t.Errorf("gateway image %s", img)
		}
	case "minimal":
		count(len(r.pdbs), 0, "PodDisruptionBudgets")
		count(len(r.jobs), 0, "Jobs")
		count(len(r.accounts), 0, "ServiceAccounts")
		wantEnv(t, r.deployments["persistence"], "ALICIA_PERSISTENCE_MIGRATE", "true")
		for _, comp := range sortedKeys(r.deployments) {
			wantEnv(t, r.deployments[comp], "ALICIA_STREAM_REPLICAS", "1")
		}
		for comp, d := range r.deployments {
			if _, ok := envValue(d.Spec.Template.Spec.Containers[0], "ALICIA_NATS_PASSWORD_FILE"); ok {
				t.Errorf("%s: a NATS password without NATS auth", comp)
			}
		}
		if _, ok := envValue(r.deployments["memory"].Spec.Template.Spec.Containers[0], "ALICIA_EMBEDDING_URL"); ok {
			t.Error("memory: an embedding URL though none is configured")
		}
	}
}

// TestTrustedProxiesString: gateway.trustedProxies also takes the
// variable's own form, one comma-separated string, passed as it is; -1
// (no limit) for systemMaxBytes is set, not taken for empty.
func TestTrustedProxiesString(t *testing.T) {
	ch := loadChart(t)
	out, err := render(ch, map[string]any{
		"gateway": map[string]any{"trustedProxies": "10.0.0.7,192.168.0.0/16"},
		"global":  map[string]any{"systemMaxBytes": -1},
	})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	r := decode(t, out)
	wantEnv(t, r.deployments["gateway"], "ALICIA_TRUSTED_PROXIES", "10.0.0.7,192.168.0.0/16")
	for _, comp := range sortedKeys(r.deployments) {
		wantEnv(t, r.deployments[comp], "ALICIA_SYSTEM_MAX_BYTES", "-1")
	}
}

// TestRefused: values the chart must refuse to render.
func TestRefused(t *testing.T) {
	ch := loadChart(t)
	for name, vals := range map[string]map[string]any{
		"persistence replicas without partitions for each": {"persistence": map[string]any{"replicas": 3, "shards": 2}},
		"persistence replicas without shards":              {"persistence": map[string]any{"replicas": 2}},
		"no persistence":                                   {"persistence": map[string]any{"replicas": 0}},
		"room-agent on two cores": {"roomAgent": map[string]any{"resources": map[string]any{
			"requests": map[string]any{"cpu": "2"}, "limits": map[string]any{"cpu": "2"}}}},
		"room-agent without LiveKit": {"livekit": map[string]any{"url": ""}},
		"six stream replicas":        {"global": map[string]any{"streamReplicas": 6}},
	} {
		if _, err := render(ch, vals); err == nil {
			t.Errorf("%s: rendered", name)
		} else {
			t.Logf("%s: %v", name, firstLine(err))
		}
	}
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

func wantEnv(t *testing.T, d *appsv1.Deployment, name, want string) {
	t.Helper()
	if d == nil {
		t.Errorf("%s: Deployment not rendered", name)
		return
	}
	got, ok := envValue(d.Spec.Template.Spec.Containers[0], name)
	if !ok || got != want {
		t.Errorf("%s: %s=%q (set %v), want %q", d.Name, name, got, ok, want)
	}
}

func envValue(ct corev1.Container, name string) (string, bool) {
	for _, e := range ct.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

func containerHasPort(ct corev1.Container, port string) bool {
	for _, p := range ct.Ports {
		if p.Name == port || fmt.Sprint(p.ContainerPort) == port {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
