package compose

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Problem is one way a compose file breaks its contract.
type Problem struct {
	Service string // "" for the file as a whole
	Rule    string
	Detail  string
}

func (p Problem) String() string {
	if p.Service == "" {
		return p.Rule + ": " + p.Detail
	}
	return p.Service + ": " + p.Rule + ": " + p.Detail
}

// The rules a Problem names.
const (
	RuleEnv     = "env"        // a variable the service's binary does not read
	RuleDepends = "depends_on" // something a service needs is not behind a condition
	RuleImage   = "image"      // a floating or unknown image
	RuleCommand = "command"    // a command or flag the image does not accept
	RuleSecrets = "secrets"    // a secret pointed at but not mounted, or mounted for nothing
	RuleHealth  = "healthcheck"
	RuleVolumes = "volumes" // a volume shared by images that run as different users
)

// Contract is what the checks know about the repository and the images.
type Contract struct {
	// Dockerfile is the build.dockerfile of the Alicia images; their build
	// arg SERVICE names the binary (cli: the alicia command).
	Dockerfile string
	// Binary is the path of the service binary in an Alicia image (its
	// ENTRYPOINT) and HealthcheckCommand the argument that makes it probe.
	Binary, HealthcheckCommand string
	// DockerfileFrom are the base images of the Dockerfile.
	DockerfileFrom []string
	// Reads returns the variables the binary of SERVICE reads, given the
	// environment the compose file sets for it.
	Reads func(service string, env map[string]string) (map[string]bool, error)
	// CLI returns the command path and the flags of an alicia command line,
	// as the binary itself parses it.
	CLI func(args []string) (path []string, flags map[string]bool, err error)
	// MustBeHealthy are services every dependent waits for with
	// service_healthy: the services connect to them at start.
	MustBeHealthy []string
	// SecretsDir is where the top-level secrets' files live and SecretNames
	// the files `alicia deploy init-secrets` writes there.
	SecretsDir  string
	SecretNames []string
	// Images are the third-party images known (Images).
	Images map[string]Image
	// UpBeforeModels are services that start without waiting for the
	// model servers (the services reserving a GPU), directly or not: they
	// report a model that does not answer yet (the gateway: ErrorMessage
	// 503 per turn, GET /v1/server-info).
	UpBeforeModels []string
	// GPUAfterVar is the variable of a GPU service's entrypoint naming the
	// health URL of the GPU service it starts after ("" : not checked).
	GPUAfterVar string
	// MetricsAddrVar returns the variable holding the address the binary
	// of SERVICE serves /metrics on ("" : none).
	MetricsAddrVar func(service string) string
	// PublicMetrics are services whose /metrics port may be published
	// beyond loopback, each with the reason.
	PublicMetrics map[string]string
	// Scrape is the Prometheus scrape configuration of the deployment
	// (nil: not checked).
	Scrape []ScrapeJob
}

// Check runs every rule on f.
func Check(f *File, c Contract) []Problem {
	var ps []Problem
	for _, rule := range []func(*File, Contract) []Problem{
		checkEnv, checkDepends, checkImages, checkCommands, checkSecrets, checkHealth, checkVolumes,
		checkLogging, checkMetrics, checkScrape, checkStartOrder,
	} {
		ps = append(ps, rule(f, c)...)
	}
	return ps
}

func (c Contract) alicia(s *Service) bool {
	return s.Build != nil && path.Clean(s.Build.Dockerfile) == path.Clean(c.Dockerfile)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// checkEnv: every variable an Alicia service is given is one its binary
// reads; a third-party image's are ones it is known to read.
func checkEnv(f *File, c Contract) []Problem {
	var ps []Problem
	for _, s := range f.Sorted() {
		var known func(string) bool
		switch {
		case c.alicia(s):
			svc := s.Build.Args["SERVICE"]
			reads, err := c.Reads(svc, s.Environment)
			if err != nil {
				ps = append(ps, Problem{s.Name, RuleEnv, fmt.Sprintf("what SERVICE=%s reads: %v", svc, err)})
				continue
			}
			known = func(name string) bool { return reads[name] || slices.Contains(RuntimeEnv, name) }
		case s.Image != "":
			img, ok := c.Images[s.Image]
			if !ok {
				continue // RuleImage reports it
			}
			known = func(name string) bool { return slices.Contains(img.Env, name) }
		default:
			continue
		}
		for _, name := range sortedKeys(s.Environment) {
			if !known(name) {
				ps = append(ps, Problem{s.Name, RuleEnv, name + " is given but never read"})
			}
		}
	}
	return ps
}

// needs returns the services s reaches: the hosts of its environment's
// URLs and addresses that are services of f, and the database (postgres,
// and the one-shot migrate job) when it reads the Postgres URL.
func needs(f *File, s *Service) []string {
	set := map[string]bool{}
	for _, v := range s.Environment {
		if h := host(v); h != "" && f.Services[h] != nil && h != s.Name {
			set[h] = true
		}
	}
	_, url := s.Environment["ALICIA_POSTGRES_URL"]
	_, file := s.Environment["ALICIA_POSTGRES_URL_FILE"]
	if url || file {
		for _, name := range sortedKeys(f.Services) {
			d := f.Services[name]
			if name == "postgres" || (d.OneShot() && len(d.Command) >= 2 && d.Command[0] == "migrate" && d.Command[1] == "up") {
				if name != s.Name {
					set[name] = true
				}
			}
		}
	}
	return sortedKeys(set)
}

// host returns the host of a URL (scheme://host:port/…) or host:port value.
func host(v string) string {
	if u, err := url.Parse(v); err == nil && u.Host != "" {
		return u.Hostname()
	}
	if h, _, err := net.SplitHostPort(v); err == nil {
		return h
	}
	return ""
}

func checkDepends(f *File, c Contract) []Problem {
	var ps []Problem
	for _, s := range f.Sorted() {
		for _, name := range sortedKeys(s.DependsOn) {
			if f.Services[name] == nil {
				ps = append(ps, Problem{s.Name, RuleDepends, "depends on " + name + ", which is not a service"})
			}
		}
		for _, n := range needs(f, s) {
			d, ok := s.DependsOn[n]
			target := f.Services[n]
			if slices.Contains(c.UpBeforeModels, s.Name) && target.GPU() {
				continue // RuleStartOrder: it must not wait for them
			}
			switch {
			case !ok:
				ps = append(ps, Problem{s.Name, RuleDepends, "reaches " + n + " but does not depend on it"})
			case target.OneShot() && d.Condition != Completed:
				ps = append(ps, Problem{s.Name, RuleDepends, fmt.Sprintf("%s is a job: wait for it with %s, not %s", n, Completed, d.Condition)})
			case slices.Contains(c.MustBeHealthy, n) && d.Condition != Healthy:
				ps = append(ps, Problem{s.Name, RuleDepends, fmt.Sprintf("%s must be %s before it starts, not %s", n, Healthy, d.Condition)})
			}
		}
		for _, name := range sortedKeys(s.DependsOn) {
			t := f.Services[name]
			if t != nil && s.DependsOn[name].Condition == Healthy && (t.Healthcheck == nil || t.Healthcheck.Disable) {
				ps = append(ps, Problem{s.Name, RuleDepends, name + " has no healthcheck to become " + Healthy})
			}
		}
	}
	return ps
}

func checkImages(f *File, c Contract) []Problem {
	var ps []Problem
	for _, s := range f.Sorted() {
		if s.Image == "" {
			if s.Build == nil {
				ps = append(ps, Problem{s.Name, RuleImage, "neither image nor build"})
			}
			continue
		}
		if !Pinned(s.Image) {
			ps = append(ps, Problem{s.Name, RuleImage, s.Image + " floats: pin a full version (x.y.z), a dated tag or a digest"})
		}
		if _, ok := c.Images[s.Image]; !ok && !c.alicia(s) {
			ps = append(ps, Problem{s.Name, RuleImage, s.Image + " is not among the known images (compose.Images): check its flags, environment and tools, and add it"})
		}
	}
	for _, from := range c.DockerfileFrom {
		if !Pinned(from) {
			ps = append(ps, Problem{"", RuleImage, c.Dockerfile + ": FROM " + from + " floats"})
		}
	}
	return ps
}

func checkCommands(f *File, c Contract) []Problem {
	var ps []Problem
	for _, s := range f.Sorted() {
		switch {
		case c.alicia(s) && s.Build.Args["SERVICE"] == "cli":
			ps = append(ps, checkCLI(s, c)...)
		case c.alicia(s):
			if len(s.Command) > 0 || len(s.Entrypoint) > 0 {
				ps = append(ps, Problem{s.Name, RuleCommand, fmt.Sprintf("the %s binary takes no arguments (only %s)", s.Build.Args["SERVICE"], c.HealthcheckCommand)})
			}
		case s.Image != "":
			img, ok := c.Images[s.Image]
			if !ok {
				continue
			}
			words, found := programWords(s, img)
			if !found {
				ps = append(ps, Problem{s.Name, RuleCommand, "does not run " + img.Program})
				continue
			}
			for _, p := range checkFlags(words, img) {
				ps = append(ps, Problem{s.Name, RuleCommand, p + " (" + s.Image + ")"})
			}
		}
	}
	return ps
}

func checkCLI(s *Service, c Contract) []Problem {
	if len(s.Command) == 0 {
		return []Problem{{s.Name, RuleCommand, "the alicia image needs a command"}}
	}
	cmdPath, flags, err := c.CLI(s.Command)
	if err != nil {
		return []Problem{{s.Name, RuleCommand, fmt.Sprintf("alicia %s: %v", strings.Join(s.Command, " "), err)}}
	}
	var ps []Problem
	var words []string
	for _, w := range s.Command {
		if strings.HasPrefix(w, "-") {
			break
		}
		words = append(words, w)
	}
	// cobra takes unknown words after a command as its arguments: the
	// command path must be every leading word.
	if !slices.Equal(words, cmdPath) {
		ps = append(ps, Problem{s.Name, RuleCommand, fmt.Sprintf("alicia %s is not a command (the nearest is alicia %s)", strings.Join(words, " "), strings.Join(cmdPath, " "))})
	}
	for _, w := range s.Command {
		if name, _, _ := strings.Cut(w, "="); strings.HasPrefix(name, "--") && !flags[name] {
			ps = append(ps, Problem{s.Name, RuleCommand, fmt.Sprintf("alicia %s has no flag %s", strings.Join(cmdPath, " "), name)})
		}
	}
	return ps
}

// programWords returns the words given to img's program: the command, or
// for a shell entrypoint the words after img.Program on its line.
func programWords(s *Service, img Image) ([]string, bool) {
	if img.Program == "" {
		return s.Command, true
	}
	for _, w := range append(append(Words{}, s.Entrypoint...), s.Command...) {
		for _, line := range strings.Split(w, "\n") {
			fields := strings.Fields(line)
			for i, f := range fields {
				if f == img.Program {
					return fields[i+1:], true
				}
			}
		}
	}
	return nil, false
}

// checkFlags reports the words img's program does not accept.
func checkFlags(words []string, img Image) []string {
	var ps []string
	for i := 0; i < len(words); i++ {
		w := words[i]
		name, value, hasValue := strings.Cut(w, "=")
		if !strings.HasPrefix(name, "-") {
			continue // the program's own name (postgres) or a flag's value
		}
		allowed, ok := img.Flags[name]
		if !ok {
			ps = append(ps, "unknown flag "+name)
			continue
		}
		if allowed == nil {
			continue
		}
		if !hasValue && i+1 < len(words) {
			value = words[i+1]
			i++
		}
		if !slices.Contains(allowed, value) {
			ps = append(ps, fmt.Sprintf("%s %s is not one of %s", name, value, strings.Join(allowed, ", ")))
		}
	}
	return ps
}

var secretPath = regexp.MustCompile(`/run/secrets/[A-Za-z0-9_.-]+`)

func checkSecrets(f *File, c Contract) []Problem {
	var ps []Problem
	used := map[string]bool{}
	for _, s := range f.Sorted() {
		mounted := map[string]string{} // path → source
		for _, r := range s.Secrets {
			mounted[r.Path()] = r.Source
			used[r.Source] = true
			if _, ok := f.Secrets[r.Source]; !ok {
				ps = append(ps, Problem{s.Name, RuleSecrets, r.Source + " is not a secret of the file"})
			}
		}
		referenced := map[string]string{} // path → where
		for _, name := range sortedKeys(s.Environment) {
			for _, p := range secretPath.FindAllString(s.Environment[name], -1) {
				referenced[p] = name
			}
		}
		for _, w := range append(append(Words{}, s.Entrypoint...), s.Command...) {
			for _, p := range secretPath.FindAllString(w, -1) {
				referenced[p] = "the command"
			}
		}
		for _, p := range sortedKeys(referenced) {
			if _, ok := mounted[p]; !ok {
				ps = append(ps, Problem{s.Name, RuleSecrets, fmt.Sprintf("%s names %s, which is not mounted", referenced[p], p)})
			}
		}
		for _, p := range sortedKeys(mounted) {
			if _, ok := referenced[p]; !ok {
				ps = append(ps, Problem{s.Name, RuleSecrets, fmt.Sprintf("%s is mounted at %s but nothing there reads it", mounted[p], p)})
			}
		}
	}
	for _, name := range sortedKeys(f.Secrets) {
		want := path.Join(c.SecretsDir, name)
		if got := path.Clean(f.Secrets[name].File); got != path.Clean(want) {
			ps = append(ps, Problem{"", RuleSecrets, fmt.Sprintf("secret %s is read from %s, not %s", name, f.Secrets[name].File, want)})
		}
		if !slices.Contains(c.SecretNames, name) {
			ps = append(ps, Problem{"", RuleSecrets, "secret " + name + " is not one init-secrets writes"})
		}
		if !used[name] {
			ps = append(ps, Problem{"", RuleSecrets, "secret " + name + " is mounted nowhere"})
		}
	}
	for _, name := range c.SecretNames {
		if _, ok := f.Secrets[name]; !ok {
			ps = append(ps, Problem{"", RuleSecrets, "init-secrets writes " + name + ", which the file does not declare"})
		}
	}
	return ps
}

func checkHealth(f *File, c Contract) []Problem {
	var ps []Problem
	for _, s := range f.Sorted() {
		if s.OneShot() {
			continue
		}
		h := s.Healthcheck
		if h == nil || h.Disable || len(h.Test) == 0 || h.Test[0] == "NONE" {
			ps = append(ps, Problem{s.Name, RuleHealth, "a long-running service without a healthcheck"})
			continue
		}
		if c.alicia(s) {
			ps = append(ps, checkAliciaHealth(s, c)...)
			continue
		}
		img, ok := c.Images[s.Image]
		if !ok {
			continue
		}
		var tool string
		switch {
		case h.Test[0] == "CMD" && len(h.Test) > 1:
			tool = h.Test[1]
		case h.Test[0] == "CMD-SHELL" && len(h.Test) > 1:
			tool = strings.Fields(h.Test[1] + " x")[0]
		}
		if !slices.Contains(img.Tools, tool) {
			ps = append(ps, Problem{s.Name, RuleHealth, fmt.Sprintf("runs %q, which %s does not have (it has %s)", tool, s.Image, strings.Join(img.Tools, ", "))})
		}
	}
	return ps
}

// checkAliciaHealth: the binary probes its own HTTP address on loopback.
func checkAliciaHealth(s *Service, c Contract) []Problem {
	t := s.Healthcheck.Test
	if len(t) != 4 || t[0] != "CMD" || t[1] != c.Binary || t[2] != c.HealthcheckCommand {
		return []Problem{{s.Name, RuleHealth, fmt.Sprintf("test %q: want [CMD %s %s <url>]", []string(t), c.Binary, c.HealthcheckCommand)}}
	}
	u, err := url.Parse(t[3])
	if err != nil || u.Scheme != "http" || (u.Hostname() != "127.0.0.1" && u.Hostname() != "localhost") {
		return []Problem{{s.Name, RuleHealth, fmt.Sprintf("%s is not an http URL on loopback", t[3])}}
	}
	for _, name := range sortedKeys(s.Environment) {
		if !strings.HasSuffix(name, "_ADDR") {
			continue
		}
		if _, port, err := net.SplitHostPort(s.Environment[name]); err == nil && port == u.Port() {
			return nil
		}
	}
	return []Problem{{s.Name, RuleHealth, fmt.Sprintf("%s: port %s is not one the service is told to serve on (an ..._ADDR variable)", t[3], u.Port())}}
}

// checkVolumes: a named volume is shared only by containers of one image,
// which run as one user (vLLM as root, speaches as uid 1000: one creating a
// shared cache leaves the other unable to write it).
func checkVolumes(f *File, _ Contract) []Problem {
	users := map[string]map[string]bool{}
	for _, s := range f.Sorted() {
		for _, v := range s.Volumes {
			if v.Type != "volume" || v.Source == "" {
				continue
			}
			if users[v.Source] == nil {
				users[v.Source] = map[string]bool{}
			}
			users[v.Source][s.Ref()] = true
		}
	}
	var ps []Problem
	for _, name := range sortedKeys(users) {
		if refs := sortedKeys(users[name]); len(refs) > 1 {
			ps = append(ps, Problem{"", RuleVolumes, fmt.Sprintf("volume %s is shared by %s", name, strings.Join(refs, " and "))})
		}
		if _, ok := f.Volumes[name]; !ok {
			ps = append(ps, Problem{"", RuleVolumes, "volume " + name + " is not declared"})
		}
	}
	return ps
}
