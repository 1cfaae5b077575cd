package metrics_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/services/asr"
	"github.com/alicia-voice/alicia/services/gateway"
	"github.com/alicia-voice/alicia/services/llm"
	"github.com/alicia-voice/alicia/services/memory"
	"github.com/alicia-voice/alicia/services/persistence"
	roomagent "github.com/alicia-voice/alicia/services/room-agent"
	"github.com/alicia-voice/alicia/services/tts"
)

var update = flag.Bool("update", false, "rewrite deploy/METRICS.md")

const deploy = "../.."

// metric is one row of the table.
type metric struct {
	name, kind, help, service string
	labels                    []string
}

// capture records what a service registers on the default registry.
type capture struct {
	prometheus.Registerer
	got []prometheus.Collector
}

func (c *capture) Register(col prometheus.Collector) error {
	c.got = append(c.got, col)
	return c.Registerer.Register(col)
}

func (c *capture) MustRegister(cs ...prometheus.Collector) {
	for _, col := range cs {
		if err := c.Register(col); err != nil {
			panic(err)
		}
	}
}

// descRE reads a Desc's String(): client_golang has no accessors for a
// descriptor's name, help and labels.
var descRE = regexp.MustCompile(`^Desc\{fqName: "([^"]+)", help: "((?:[^"\\]|\\.)*)", (?:unit: "[^"]*", )?constLabels: \{[^}]*\}, variableLabels: \{([^}]*)\}\}$`)

// kindOf tells a collector's metric type.
func kindOf(t *testing.T, c prometheus.Collector) string {
	switch c.(type) {
	case *prometheus.CounterVec:
		return "counter"
	case *prometheus.GaugeVec:
		return "gauge"
	case *prometheus.HistogramVec:
		return "histogram"
	case *prometheus.SummaryVec:
		return "summary"
	}
	if fmt.Sprintf("%T", c) == "*telemetry.lagSet" {
		return "gauge" // read from the server at each scrape
	}
	ch := make(chan prometheus.Metric, 16)
	go func() { c.Collect(ch); close(ch) }()
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		switch {
		case pb.Counter != nil:
			return "counter"
		case pb.Gauge != nil:
			return "gauge"
		case pb.Histogram != nil:
			return "histogram"
		case pb.Summary != nil:
			return "summary"
		}
	}
	t.Fatalf("metric type of %T unknown: add it to kindOf", c)
	return ""
}

var (
	collected     []metric
	collectedOnce sync.Once
)

// collect is the table's rows. Services register their metrics once per
// process, so they are read once.
func collect(t *testing.T) []metric {
	t.Helper()
	collectedOnce.Do(func() { collected = collectOnce(t) })
	if len(collected) == 0 {
		t.Fatal("no metric collected")
	}
	return collected
}

func collectOnce(t *testing.T) []metric {
	services := []string{"gateway", "asr", "llm", "tts", "room-agent", "persistence", "memory"}
	registerers := map[string]func(){
		"asr": asr.RegisterMetrics, "llm": llm.RegisterMetrics, "tts": tts.RegisterMetrics,
		"room-agent": roomagent.RegisterMetrics, "persistence": persistence.RegisterMetrics,
		"memory": memory.RegisterMetrics, "gateway": gateway.RegisterMetrics,
	}
	var out []metric
	add := func(service string, cs []prometheus.Collector) {
		for _, c := range cs {
			kind := kindOf(t, c)
			ch := make(chan *prometheus.Desc, 16)
			go func() { c.Describe(ch); close(ch) }()
			for d := range ch {
				m := descRE.FindStringSubmatch(d.String())
				if m == nil {
					t.Fatalf("cannot read %s", d)
				}
				var labels []string
				if m[3] != "" {
					labels = strings.Split(m[3], ",")
				}
				out = append(out, metric{name: m[1], kind: kind, help: strings.ReplaceAll(m[2], `\"`, `"`), service: service, labels: labels})
			}
		}
	}
	saved := prometheus.DefaultRegisterer
	defer func() { prometheus.DefaultRegisterer = saved }()
	for _, s := range services {
		c := &capture{Registerer: prometheus.NewRegistry()}
		prometheus.DefaultRegisterer = c
		registerers[s]()
		if len(c.got) == 0 {
			t.Fatalf("%s registered no metric", s)
		}
		add(s, c.got)
	}
	prometheus.DefaultRegisterer = saved
	add("every service reading JetStream", []prometheus.Collector{telemetry.ConsumerLagMetrics()})
	add("the service that gave up on the envelope", []prometheus.Collector{bus.DeadLetterMetrics()})
	add("every service with core-NATS routes", []prometheus.Collector{bus.RouteMetrics()})
	add("the edges: gateway, room-agent", []prometheus.Collector{edge.RefusalMetrics()})
	slices.SortFunc(out, func(a, b metric) int { return strings.Compare(a.name, b.name) })
	return out
}

func table(ms []metric) []byte {
	var b bytes.Buffer
	b.WriteString(`# Metrics

Every service serves Prometheus metrics on ` + "`GET /metrics`" + ` at its private metrics
address (` + "`ALICIA_<SERVICE>_METRICS_ADDR`" + `, see each service's README), with
` + "`GET /healthz`" + ` and ` + "`GET /livez`" + ` beside it. The gateway exports its sessions bucket's size; the memory
service exports the consumer-lag metrics of its consumers besides its own.

This table is generated from the metrics the services register
(` + "`cd deploy/checks && GOWORK=off go test ./metrics -update`" + `); the same test fails when it
is stale, or when the alert rules (` + "`deploy/prometheus/alerts.yml`" + `) or the dashboard
(` + "`deploy/grafana/alicia.json`" + `) use a metric that is not in it. Histograms also
have the ` + "`_bucket`" + `, ` + "`_sum`" + ` and ` + "`_count`" + ` series Prometheus makes of them.

| Name | Type | Labels | Service | Meaning |
|---|---|---|---|---|
`)
	for _, m := range ms {
		labels := "—"
		if len(m.labels) > 0 {
			labels = "`" + strings.Join(m.labels, "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", m.name, m.kind, labels, m.service, strings.ReplaceAll(m.help, "|", `\|`))
	}
	return b.Bytes()
}

// TestMetricsTable: deploy/METRICS.md is the table of what the services register.
func TestMetricsTable(t *testing.T) {
	ms := collect(t)
	for i := 1; i < len(ms); i++ {
		if ms[i].name == ms[i-1].name {
			t.Errorf("%s is registered by %s and %s", ms[i].name, ms[i-1].service, ms[i].service)
		}
	}
	for _, m := range ms {
		if !strings.HasPrefix(m.name, "alicia_") {
			t.Errorf("%s: every metric is named alicia_*", m.name)
		}
		if m.kind == "counter" && !strings.HasSuffix(m.name, "_total") {
			t.Errorf("%s: a counter's name ends in _total", m.name)
		}
	}
	path := filepath.Join(deploy, "METRICS.md")
	want := table(ms)
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	have, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, want) {
		t.Fatalf("%s is stale: cd deploy/checks && GOWORK=off go test ./metrics -update", path)
	}
}

var metricRE = regexp.MustCompile(`\balicia_[a-z0-9_]+`)

// TestAlertsAndDashboardUseKnownMetrics: a metric name misspelt in a rule
// or a panel is a rule that never fires or a panel that stays empty;
// promtool cannot tell, the table can.
func TestAlertsAndDashboardUseKnownMetrics(t *testing.T) {
	known := map[string]bool{}
	for _, m := range collect(t) {
		known[m.name] = true
		if m.kind == "histogram" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				known[m.name+s] = true
			}
		}
	}
	rules, err := os.ReadFile(filepath.Join(deploy, "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	dash, err := os.ReadFile(filepath.Join(deploy, "grafana", "alicia.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(dash, &d); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	exprs := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			exprs++
			for _, n := range metricRE.FindAllString(tg.Expr, -1) {
				if !known[n] {
					t.Errorf("dashboard panel %q uses %s, not a metric of deploy/METRICS.md", p.Title, n)
				}
			}
		}
	}
	if exprs == 0 {
		t.Error("the dashboard has no query")
	}
	for _, n := range metricRE.FindAllString(string(rules), -1) {
		if !known[n] {
			t.Errorf("alerts.yml uses %s, not a metric of deploy/METRICS.md", n)
		}
	}
}
