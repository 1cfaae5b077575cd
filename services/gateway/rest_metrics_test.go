package gateway_test

import (
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// series is the sample of metric family name whose labels are exactly
// labels (0 when there is none yet).
func series(t *testing.T, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue next
				}
			}
			return m
		}
	}
	return &dto.Metric{Counter: &dto.Counter{Value: new(0.0)}, Histogram: &dto.Histogram{SampleCount: new(uint64(0))}}
}

// TestHTTPMetrics: every request is counted by its registered route (not
// its path: an id is no label), method and the status the client got;
// answers are timed, WebSocket connections only counted.
func TestHTTPMetrics(t *testing.T) {
	s := newStack(t)
	requests := func(route, method, status string) float64 {
		return series(t, "alicia_gateway_http_requests_total", map[string]string{"route": route, "method": method, "status": status}).GetCounter().GetValue()
	}
	timed := func(route, method string) uint64 {
		return series(t, "alicia_gateway_http_request_duration_seconds", map[string]string{"route": route, "method": method}).GetHistogram().GetSampleCount()
	}
	missing, list, denied := requests("/v1/conversations/:id", "GET", "404"), requests("/v1/conversations", "GET", "200"), requests("/v1/conversations", "GET", "401")
	listTimed, ws, wsTimed := timed("/v1/conversations", "GET"), requests("/v1/ws", "GET", "426"), timed("/v1/ws", "GET")

	s.call(t, aliceKey, "GET", "/v1/conversations/ac_nope", nil).wantError(http.StatusNotFound)
	s.call(t, aliceKey, "GET", "/v1/conversations/ac_other", nil).wantError(http.StatusNotFound)
	s.call(t, aliceKey, "GET", "/v1/conversations", nil).want(http.StatusOK, nil)
	s.call(t, "", "GET", "/v1/conversations", nil).wantError(http.StatusUnauthorized)
	req, _ := http.NewRequest(http.MethodGet, s.base+"/v1/ws", nil)
	req.Header.Set("Authorization", "Bearer "+aliceKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	if got := requests("/v1/conversations/:id", "GET", "404") - missing; got != 2 {
		t.Errorf("%v GET /v1/conversations/:id 404 counted, want 2", got)
	}
	if got := requests("/v1/conversations", "GET", "200") - list; got != 1 {
		t.Errorf("%v GET /v1/conversations 200 counted, want 1", got)
	}
	if got := requests("/v1/conversations", "GET", "401") - denied; got != 1 {
		t.Errorf("%v GET /v1/conversations 401 counted, want 1", got)
	}
	if got := timed("/v1/conversations", "GET") - listTimed; got != 2 {
		t.Errorf("%d answers of GET /v1/conversations timed, want 2", got)
	}
	if got := requests("/v1/ws", "GET", "426") - ws; got != 1 || timed("/v1/ws", "GET") != wsTimed {
		t.Errorf("GET /v1/ws: %v counted (want 1), timed %d more (want 0)", got, timed("/v1/ws", "GET")-wsTimed)
	}
}
