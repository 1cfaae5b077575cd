package helm

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/strvals"
	networkingv1 "k8s.io/api/networking/v1"
)

// readme is what the chart's README tells the operator to run.
type readme struct {
	installs []helmInstall
	// secrets: "<namespace>/<name>" → key → value (placeholders for $(…)).
	secrets map[string]map[string]string
	vars    map[string]string
	// built: the services the Images section builds an image of.
	built []string
}

// helmInstall is one `helm install` command.
type helmInstall struct {
	line                      string
	release, chart, namespace string
	valueFiles, sets, setStrs []string
}

// readReadme runs, in the sense above, the README's sh blocks: variable
// assignments, `kubectl create secret generic` and `helm install`; it
// ignores the other commands.
func readReadme(t *testing.T) *readme {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	rd := &readme{secrets: map[string]map[string]string{}}
	sh := &shell{vars: map[string]string{}}
	for _, line := range shellLines(text) {
		switch {
		case assignment.MatchString(line):
			if err := sh.assign(line); err != nil {
				t.Fatal(err)
			}
		case strings.HasPrefix(line, "kubectl ") && strings.Contains(line, " create secret generic "):
			words, err := sh.words(line)
			if err != nil {
				t.Fatal(err)
			}
			ns, name, keys := parseCreateSecret(t, words)
			if rd.secrets[ns+"/"+name] != nil {
				t.Errorf("README: Secret %s/%s made twice", ns, name)
			}
			rd.secrets[ns+"/"+name] = keys
		case strings.HasPrefix(line, "helm install "):
			words, err := sh.words(line)
			if err != nil {
				t.Fatal(err)
			}
			rd.installs = append(rd.installs, parseHelmInstall(t, line, words))
		}
	}
	rd.vars = sh.vars
	if m := regexp.MustCompile(`for s in ([a-z -]+); do`).FindStringSubmatch(text); m != nil {
		rd.built = strings.Fields(m[1])
	}
	if strings.Contains(text, "--build-arg SERVICE=room-agent") {
		rd.built = append(rd.built, "room-agent")
	}
	return rd
}

// parseCreateSecret reads `kubectl [-n NS] create secret generic NAME
// --from-literal=KEY=VALUE…`.
func parseCreateSecret(t *testing.T, words []string) (ns, name string, keys map[string]string) {
	t.Helper()
	keys = map[string]string{}
	var pos []string
	for i := 1; i < len(words); i++ {
		w := words[i]
		switch {
		case w == "-n" || w == "--namespace":
			i++
			ns = words[i]
		case strings.HasPrefix(w, "--namespace="):
			ns = strings.TrimPrefix(w, "--namespace=")
		case strings.HasPrefix(w, "--from-literal="):
			k, v, _ := strings.Cut(strings.TrimPrefix(w, "--from-literal="), "=")
			keys[k] = v
		case strings.HasPrefix(w, "-"):
			t.Fatalf("README: kubectl create secret: flag %s is unknown to this test", w)
		default:
			pos = append(pos, w)
		}
	}
	if len(pos) != 4 || ns == "" {
		t.Fatalf("README: %q: want kubectl -n <namespace> create secret generic <name> …", strings.Join(words, " "))
	}
	return ns, pos[3], keys
}

// parseHelmInstall reads `helm install RELEASE CHART` and the flags the
// README uses; another flag fails, so the test never renders with less
// than the command says.
func parseHelmInstall(t *testing.T, line string, words []string) helmInstall {
	t.Helper()
	in := helmInstall{line: line}
	var pos []string
	value := func(i *int, w, flag string) (string, bool) {
		if w == flag {
			*i++
			if *i >= len(words) {
				t.Fatalf("README: %s without a value", flag)
			}
			return words[*i], true
		}
		if v, ok := strings.CutPrefix(w, flag+"="); ok {
			return v, true
		}
		return "", false
	}
	for i := 2; i < len(words); i++ {
		w := words[i]
		if v, ok := value(&i, w, "-n"); ok {
			in.namespace = v
		} else if v, ok := value(&i, w, "--namespace"); ok {
			in.namespace = v
		} else if v, ok := value(&i, w, "-f"); ok {
			in.valueFiles = append(in.valueFiles, v)
		} else if v, ok := value(&i, w, "--values"); ok {
			in.valueFiles = append(in.valueFiles, v)
		} else if v, ok := value(&i, w, "--set"); ok {
			in.sets = append(in.sets, v)
		} else if v, ok := value(&i, w, "--set-string"); ok {
			in.setStrs = append(in.setStrs, v)
		} else if _, ok := value(&i, w, "--version"); ok {
			// The chart's version: the chart is not fetched here.
		} else if strings.HasPrefix(w, "-") {
			t.Fatalf("README: %q: flag %s is unknown to this test; teach it what the flag does", line, w)
		} else {
			pos = append(pos, w)
		}
	}
	if len(pos) != 2 || in.namespace == "" {
		t.Fatalf("README: %q: want helm install <release> <chart> -n <namespace> …", line)
	}
	in.release, in.chart = pos[0], pos[1]
	return in
}

// values are the install's values as helm computes them: the -f files in
// order, then every --set, then every --set-string (helm's pkg/cli/values).
func (in helmInstall) values(t *testing.T) map[string]any {
	t.Helper()
	vals := map[string]any{}
	for _, f := range in.valueFiles {
		rel, err := filepath.Rel(filepath.Clean("deploy/helm/alicia"), filepath.Clean(f))
		if err != nil || strings.HasPrefix(rel, "..") {
			t.Fatalf("README: %q: values file %s is not in the chart's directory", in.line, f)
		}
		vals = mergeMaps(vals, readValues(t, rel))
	}
	for _, s := range in.sets {
		if err := strvals.ParseInto(s, vals); err != nil {
			t.Fatalf("README: --set %s: %v", s, err)
		}
	}
	for _, s := range in.setStrs {
		if err := strvals.ParseIntoString(s, vals); err != nil {
			t.Fatalf("README: --set-string %s: %v", s, err)
		}
	}
	return vals
}

// install is the README's one `helm install` of chart.
func (rd *readme) install(t *testing.T, chart string) helmInstall {
	t.Helper()
	var found []helmInstall
	for _, in := range rd.installs {
		if in.chart == chart {
			found = append(found, in)
		}
	}
	if len(found) != 1 {
		t.Fatalf("README: %d `helm install … %s` commands, want one", len(found), chart)
	}
	return found[0]
}

// natsFullname is the official nats chart's name for its objects, the
// client Service among them (its nats.fullname).
func natsFullname(release string) string {
	if strings.Contains(release, "nats") {
		return release
	}
	return release + "-nats"
}

// TestReadmeInstall renders the chart with exactly the README's install
// command (its release, namespace, values files and --set flags, with the
// README's variables), runs every check of TestRender on it, and checks
// that the command is complete: every Secret key the pods mount is made by
// the README in the release's namespace, every service reaches the NATS
// the README installs, the model and LiveKit URLs name the Services of the
// examples the README applies, and the images are the ones it builds.
func TestReadmeInstall(t *testing.T) {
	rd := readReadme(t)
	in := rd.install(t, "deploy/helm/alicia")
	out, err := renderAs(loadChart(t), in.values(t), in.release, in.namespace)
	if err != nil {
		t.Fatalf("README's install: render: %v", err)
	}
	r := decode(t, out)
	checkDeployments(t, r)
	checkServices(t, r)
	checkPDBs(t, r)
	checkHPAs(t, r)
	checkIngresses(t, r)
	checkServiceAccounts(t, r)
	checkVariables(t, r, readSources(t))
	if len(r.deployments) != len(probePaths) {
		t.Errorf("%d Deployments rendered, want %d", len(r.deployments), len(probePaths))
	}

	// Every Secret key a pod mounts, made in the release's namespace.
	for where, pod := range podTemplates(r) {
		for _, v := range pod.Spec.Volumes {
			for _, src := range secretFilesOf(v) {
				name, key, _ := strings.Cut(src, "/")
				if _, ok := rd.secrets[in.namespace+"/"+name][key]; !ok {
					t.Errorf("%s mounts key %s of Secret %s, which the README does not make in namespace %s", where, key, name, in.namespace)
				}
			}
		}
	}

	// NATS: the README's nats release, with the generated users, whose
	// passwords come from Secrets the README makes in its namespace.
	nats := rd.install(t, "nats/nats")
	if !slices.Contains(nats.valueFiles, "deploy/helm/alicia/examples/nats-auth-values.yaml") {
		t.Errorf("README: %q does not give the generated users (examples/nats-auth-values.yaml)", nats.line)
	}
	natsVals := map[string]any{}
	for _, f := range nats.valueFiles {
		rel, err := filepath.Rel("deploy/helm/alicia", f)
		if err != nil || strings.HasPrefix(rel, "..") {
			t.Fatalf("README: %q: values file %s is not in the chart's directory", nats.line, f)
		}
		natsVals = mergeMaps(natsVals, readValues(t, rel))
	}
	env, _ := dig(t, natsVals, "container", "env").(map[string]any)
	for name, v := range env {
		ref, ok := digOK(v, "valueFrom", "secretKeyRef")
		if !ok {
			continue
		}
		m := ref.(map[string]any)
		if _, ok := rd.secrets[nats.namespace+"/"+fmt.Sprint(m["name"])][fmt.Sprint(m["key"])]; !ok {
			t.Errorf("the nats chart's %s reads key %v of Secret %v, which the README does not make in namespace %s", name, m["key"], m["name"], nats.namespace)
		}
	}
	natsHost := natsFullname(nats.release) + "." + nats.namespace + ".svc.cluster.local"
	for _, comp := range sortedKeys(r.deployments) {
		urls, _ := envValue(r.deployments[comp].Spec.Template.Spec.Containers[0], "ALICIA_NATS_URL")
		for _, raw := range strings.Split(urls, ",") {
			u, err := url.Parse(raw)
			if err != nil || u.Scheme != "nats" || u.Hostname() != natsHost || u.Port() != "4222" {
				t.Errorf("%s: ALICIA_NATS_URL %s, want nats://%s:4222, the README's nats release", comp, urls, natsHost)
			}
		}
	}

	// The model servers and LiveKit: the examples' Services.
	models := loadExample(t, "examples/models-download.yaml", "examples/models.yaml")
	livekit := loadExample(t, "examples/livekit.yaml")
	gw := r.deployments["gateway"].Spec.Template.Spec.Containers[0]
	for _, engine := range []string{"LLM", "EMBEDDING", "ASR", "TTS"} {
		u, _ := envValue(gw, "ALICIA_"+engine+"_URL")
		if _, err := models.serviceAt(u); err != nil {
			t.Errorf("README's install: models.%s.url: %v", strings.ToLower(engine), err)
		}
	}
	lk, _ := envValue(gw, "ALICIA_LIVEKIT_URL")
	if _, err := livekit.serviceAt(lk); err != nil {
		t.Errorf("README's install: livekit.url: %v", err)
	}
	public, _ := envValue(gw, "ALICIA_LIVEKIT_PUBLIC_URL")
	pu, err := url.Parse(public)
	if err != nil || pu.Scheme != "wss" {
		t.Errorf("README's install: livekit.publicURL %q: browsers need wss://", public)
	} else if !slices.ContainsFunc(livekit.ingresses, func(ing *networkingv1.Ingress) bool {
		return slices.ContainsFunc(ing.Spec.Rules, func(rule networkingv1.IngressRule) bool { return rule.Host == pu.Hostname() })
	}) {
		t.Errorf("README's install: livekit.publicURL %s: no Ingress of examples/livekit.yaml serves that host", public)
	}
	// LiveKit's key and secret: the same in its namespace as in Alicia's.
	secret, _ := dig(t, readValues(t, "values.yaml"), "livekit", "secretName").(string)
	mine, theirs := rd.secrets[in.namespace+"/"+secret], rd.secrets[livekit.namespace+"/"+secret]
	if len(mine) == 0 || fmt.Sprint(mine) != fmt.Sprint(theirs) {
		t.Errorf("README: Secret %s is %v in namespace %s and %v in %s: LiveKit must have the same key and secret", secret, mine, in.namespace, theirs, livekit.namespace)
	}

	// Images: <registry>/alicia-<service>:<tag>, as the README builds them.
	for where, pod := range podTemplates(r) {
		for _, ct := range pod.Spec.Containers {
			rest, ok := strings.CutPrefix(ct.Image, rd.vars["REG"]+"/alicia-")
			svc, tag, _ := strings.Cut(rest, ":")
			if !ok || rd.vars["REG"] == "" || tag != rd.vars["TAG"] || !slices.Contains(rd.built, svc) {
				t.Errorf("%s: image %s, not one the README builds (%s/alicia-{%s}:%s)", where, ct.Image, rd.vars["REG"], strings.Join(rd.built, ","), rd.vars["TAG"])
			}
		}
	}
}
