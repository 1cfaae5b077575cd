package compose

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// The rules of running the file on one box for months: logs that do not
// fill the disk, metrics that stay private and are scraped on every
// replica, and a start order that survives a reboot.
const (
	RuleLogging    = "logging"     // a service whose log is not rotated
	RuleMetrics    = "metrics"     // a /metrics address published beyond this host
	RuleScrape     = "scrape"      // a service, or a replica of it, Prometheus does not scrape
	RuleStartOrder = "start_order" // the gateway waiting for the models; GPU services starting together
)

// ScrapeJob is one job of a Prometheus scrape configuration.
type ScrapeJob struct {
	Name string
	// Static are the targets of its static_configs (host:port).
	Static []string
	// DNS are its dns_sd_configs.
	DNS []DNSSD
}

// DNSSD is one dns_sd_configs entry: the names asked, the record type
// (Prometheus's default is SRV) and the port of each address found.
type DNSSD struct {
	Names []string
	Type  string
	Port  int
}

// ParseScrape reads the scrape jobs of a Prometheus configuration file.
func ParseScrape(data []byte) ([]ScrapeJob, error) {
	var raw struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
			DNSSDConfigs []struct {
				Names []string `yaml:"names"`
				Type  string   `yaml:"type"`
				Port  int      `yaml:"port"`
			} `yaml:"dns_sd_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, err
	}
	var jobs []ScrapeJob
	for _, sc := range raw.ScrapeConfigs {
		j := ScrapeJob{Name: sc.JobName}
		for _, st := range sc.StaticConfigs {
			j.Static = append(j.Static, st.Targets...)
		}
		for _, d := range sc.DNSSDConfigs {
			typ := strings.ToUpper(d.Type)
			if typ == "" {
				typ = "SRV"
			}
			j.DNS = append(j.DNS, DNSSD{Names: d.Names, Type: typ, Port: d.Port})
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// checkLogging: every container's log is rotated. Docker's default
// json-file driver keeps the whole log unless max-size is set; the local
// driver rotates by default.
func checkLogging(f *File, _ Contract) []Problem {
	var ps []Problem
	for _, s := range f.Sorted() {
		l := s.Logging
		switch {
		case l == nil:
			ps = append(ps, Problem{s.Name, RuleLogging, "no logging section: Docker's default json-file log grows without bound"})
		case l.Driver == "json-file" && (l.Options["max-size"] == "" || l.Options["max-file"] == ""):
			ps = append(ps, Problem{s.Name, RuleLogging, fmt.Sprintf("json-file with options %v: set max-size and max-file, or the log grows without bound", l.Options)})
		case l.Driver != "json-file" && l.Driver != "local":
			ps = append(ps, Problem{s.Name, RuleLogging, fmt.Sprintf("driver %q: use json-file (with max-size and max-file) or local, which rotate on this host", l.Driver)})
		}
	}
	return ps
}

// metricsPort is the container port an Alicia service serves /metrics on
// ("" : none).
func (c Contract) metricsPort(s *Service) string {
	if !c.alicia(s) || c.MetricsAddrVar == nil {
		return ""
	}
	v := c.MetricsAddrVar(s.Build.Args["SERVICE"])
	if v == "" {
		return ""
	}
	_, port, err := net.SplitHostPort(s.Environment[v])
	if err != nil {
		return ""
	}
	return port
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkMetrics: a port serving /metrics is published on this host's
// loopback only, if at all (the metrics name conversations' volumes and a
// service's internals: Prometheus reads them on the compose network).
func checkMetrics(f *File, c Contract) []Problem {
	var ps []Problem
	for _, s := range f.Sorted() {
		port := c.metricsPort(s)
		if port == "" {
			continue
		}
		for _, p := range s.Published() {
			if p.ContainerPort != port || p.Protocol != "tcp" || loopback(p.HostIP) {
				continue
			}
			if _, waived := c.PublicMetrics[s.Name]; waived {
				continue
			}
			on := p.HostIP
			if on == "" {
				on = "every address of the host"
			}
			ps = append(ps, Problem{s.Name, RuleMetrics, fmt.Sprintf("port %s, where it serves /metrics (%s), is published on %s: publish it on 127.0.0.1 or not at all",
				port, c.MetricsAddrVar(s.Build.Args["SERVICE"]), on)})
		}
	}
	return ps
}

// checkScrape: every long-running service with a metrics address is
// scraped, each replica apart. Docker's DNS answers a service's name with
// one A record per container and serves no SRV records: a static target
// reaches one replica per scrape, and dns_sd_configs must ask for A records.
func checkScrape(f *File, c Contract) []Problem {
	if c.Scrape == nil {
		return nil
	}
	var ps []Problem
	for _, j := range c.Scrape {
		for _, d := range j.DNS {
			for _, n := range d.Names {
				if f.Services[n] == nil {
					ps = append(ps, Problem{"", RuleScrape, fmt.Sprintf("job %s asks DNS for %s, which is not a service", j.Name, n)})
				}
			}
		}
	}
	for _, s := range f.Sorted() {
		port := c.metricsPort(s)
		if port == "" || s.OneShot() {
			continue
		}
		found := false
		for _, j := range c.Scrape {
			for _, t := range j.Static {
				if h, _, _ := net.SplitHostPort(t); h == s.Name {
					found = true
					ps = append(ps, Problem{s.Name, RuleScrape, fmt.Sprintf("job %s has the static target %s: each scrape reaches one replica, whichever Docker's DNS answers; use dns_sd_configs (type A, port %s)", j.Name, t, port)})
				}
			}
			for _, d := range j.DNS {
				if !slices.Contains(d.Names, s.Name) {
					continue
				}
				found = true
				if d.Type != "A" {
					ps = append(ps, Problem{s.Name, RuleScrape, fmt.Sprintf("job %s asks DNS for %s records: Docker's DNS answers a service's name with A records only", j.Name, d.Type)})
				}
				if strconv.Itoa(d.Port) != port {
					ps = append(ps, Problem{s.Name, RuleScrape, fmt.Sprintf("job %s scrapes port %d; /metrics is on %s", j.Name, d.Port, port)})
				}
			}
		}
		if !found {
			ps = append(ps, Problem{s.Name, RuleScrape, "no scrape job finds it (its /metrics is on port " + port + ")"})
		}
	}
	return ps
}

// checkStartOrder: the services of c.UpBeforeModels wait for no model
// server, directly or through another service (they report a model that
// does not answer); and the GPU services start one after the other, each
// waiting, in its entrypoint, for the health of the one before it
// (c.GPUAfterVar): after a reboot the daemon starts them all at once,
// whatever depends_on says.
func checkStartOrder(f *File, c Contract) []Problem {
	var ps []Problem
	for _, name := range c.UpBeforeModels {
		s := f.Services[name]
		if s == nil {
			continue
		}
		for dep, via := range dependencyPaths(f, s) {
			if d := f.Services[dep]; d != nil && d.GPU() {
				ps = append(ps, Problem{name, RuleStartOrder, fmt.Sprintf("waits for the model server %s (%s): it must answer while the models load", dep, strings.Join(via, " → "))})
			}
		}
	}
	if c.GPUAfterVar == "" {
		return ps
	}
	var gpus []*Service
	for _, s := range f.Sorted() {
		if s.GPU() && !s.OneShot() {
			gpus = append(gpus, s)
		}
	}
	var first []string
	after := map[string]string{} // service → the GPU service it waits for
	for _, s := range gpus {
		u := s.Environment[c.GPUAfterVar]
		if !strings.Contains(strings.Join(s.Entrypoint, "\n"), "$"+c.GPUAfterVar) {
			ps = append(ps, Problem{s.Name, RuleStartOrder, "its entrypoint does not wait for $" + c.GPUAfterVar})
		}
		if u == "" {
			first = append(first, s.Name)
			continue
		}
		h := host(u)
		prev := f.Services[h]
		if prev == nil || !prev.GPU() {
			ps = append(ps, Problem{s.Name, RuleStartOrder, fmt.Sprintf("%s=%s: %s is not a GPU service", c.GPUAfterVar, u, h)})
			continue
		}
		after[s.Name] = h
		if s.DependsOn[h].Condition != Healthy {
			ps = append(ps, Problem{s.Name, RuleStartOrder, fmt.Sprintf("waits for %s at start but not in depends_on (%s)", h, Healthy)})
		}
		if !probes(prev, u) {
			ps = append(ps, Problem{s.Name, RuleStartOrder, fmt.Sprintf("%s=%s is not what %s's healthcheck asks", c.GPUAfterVar, u, h)})
		}
	}
	if len(gpus) > 0 && len(first) != 1 {
		ps = append(ps, Problem{"", RuleStartOrder, fmt.Sprintf("GPU services that wait for none (%s empty): %v; want exactly one, the others one after the other", c.GPUAfterVar, first)})
	}
	waitedBy := map[string][]string{}
	for s, prev := range after {
		waitedBy[prev] = append(waitedBy[prev], s)
	}
	for _, prev := range sortedKeys(waitedBy) {
		if w := waitedBy[prev]; len(w) > 1 {
			slices.Sort(w)
			ps = append(ps, Problem{"", RuleStartOrder, fmt.Sprintf("%v all start once %s is healthy, together", w, prev)})
		}
	}
	for _, s := range gpus {
		seen := map[string]bool{}
		for n := s.Name; after[n] != ""; n = after[n] {
			if seen[n] {
				ps = append(ps, Problem{s.Name, RuleStartOrder, "the GPU services wait for each other in a cycle"})
				break
			}
			seen[n] = true
		}
	}
	return ps
}

// probes reports whether s's healthcheck asks, on its own loopback, the
// port and path of u.
func probes(s *Service, u string) bool {
	pu, err := url.Parse(u)
	if err != nil || s.Healthcheck == nil {
		return false
	}
	for _, w := range s.Healthcheck.Test {
		for _, lo := range []string{"127.0.0.1", "localhost"} {
			if strings.Contains(w, "http://"+lo+":"+pu.Port()+pu.Path) {
				return true
			}
		}
	}
	return false
}

// dependencyPaths returns every service s waits for, directly or not,
// each with the chain of depends_on leading to it.
func dependencyPaths(f *File, s *Service) map[string][]string {
	out := map[string][]string{}
	var walk func(*Service, []string)
	walk = func(d *Service, via []string) {
		for _, n := range sortedKeys(d.DependsOn) {
			if _, ok := out[n]; ok || n == s.Name {
				continue
			}
			path := append(append([]string{}, via...), n)
			out[n] = path
			if next := f.Services[n]; next != nil {
				walk(next, path)
			}
		}
	}
	walk(s, []string{s.Name})
	return out
}
