// Package prometheus validates the Prometheus alert rules and the Grafana
// dashboard in deploy/ with Prometheus's own parsers: rulefmt, what
// `promtool check rules` runs on a rule file, and the PromQL parser for
// every query of the dashboard. Which metrics they name is checked against
// deploy/METRICS.md by deploy/checks/metrics.
package prometheus

import (
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

func TestAlertRules(t *testing.T) {
	groups, errs := rulefmt.ParseFile("../../prometheus/alerts.yml", false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Error(err)
	}
	if groups == nil {
		t.Fatal("no rule groups")
	}
	n := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			n++
			if r.Alert == "" {
				continue
			}
			for _, k := range []string{"summary", "description"} {
				if strings.TrimSpace(r.Annotations[k]) == "" {
					t.Errorf("alert %s has no %s", r.Alert, k)
				}
			}
			if r.Labels["severity"] != "warning" && r.Labels["severity"] != "critical" {
				t.Errorf("alert %s: severity %q, want warning or critical", r.Alert, r.Labels["severity"])
			}
		}
	}
	if n < 10 {
		t.Errorf("%d rules; the file should hold the alerts of deploy/METRICS.md's main metrics", n)
	}
}

func TestDashboardQueriesParse(t *testing.T) {
	b, err := os.ReadFile("../../grafana/alicia.json")
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
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	n := 0
	p := parser.NewParser(parser.Options{})
	for _, panel := range d.Panels {
		for _, tg := range panel.Targets {
			n++
			if _, err := p.ParseExpr(tg.Expr); err != nil {
				t.Errorf("panel %q: %s: %v", panel.Title, tg.Expr, err)
			}
		}
	}
	if n == 0 {
		t.Fatal("the dashboard has no query")
	}
}
