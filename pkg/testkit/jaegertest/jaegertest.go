// Package jaegertest gives tests the Jaeger binary of pkg/jaeger and reads
// traces back from a running Jaeger's query API.
package jaegertest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/alicia-voice/alicia/pkg/devtools"
)

// Binary returns the cached Jaeger binary (devtools.Need: the test task's
// tools step has built it; a test never builds it).
func Binary(t testing.TB) string {
	t.Helper()
	return devtools.Need(t, devtools.Jaeger)
}

// Trace is a trace as Jaeger's query API (/api/traces) gives it.
type Trace struct {
	TraceID   string             `json:"traceID"`
	Spans     []Span             `json:"spans"`
	Processes map[string]Process `json:"processes"`
}

// Span is one span of a Trace.
type Span struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	StartTime int64  `json:"startTime"` // µs since the epoch
	Duration  int64  `json:"duration"`  // µs
	Tags      []Tag  `json:"tags"`
	ProcessID string `json:"processID"`
}

// Tag is a span's or a process's attribute.
type Tag struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// Process is the resource of spans: their service.
type Process struct {
	ServiceName string `json:"serviceName"`
	Tags        []Tag  `json:"tags"`
}

// Tag returns the value of the span's tag key (nil without it).
func (s Span) Tag(key string) any {
	for _, t := range s.Tags {
		if t.Key == key {
			return t.Value
		}
	}
	return nil
}

// Parent is the span id of the span's parent ("" for a root).
func (s Span) Parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" && r.TraceID == s.TraceID {
			return r.SpanID
		}
	}
	return ""
}

// GetTrace reads one trace from the query API at uiURL (Server.UIURL):
// GET /api/traces/{id}. A trace Jaeger does not have is an error.
func GetTrace(ctx context.Context, uiURL, traceID string) (Trace, error) {
	var resp struct {
		Data   []Trace `json:"data"`
		Errors []struct {
			Code int    `json:"code"`
			Msg  string `json:"msg"`
		} `json:"errors"`
	}
	if err := getJSON(ctx, uiURL+"/api/traces/"+url.PathEscape(traceID), &resp); err != nil {
		return Trace{}, err
	}
	if len(resp.Data) != 1 {
		return Trace{}, fmt.Errorf("jaeger: trace %s: %d traces, errors %v", traceID, len(resp.Data), resp.Errors)
	}
	return resp.Data[0], nil
}

// FindTraces asks the query API for the service's traces:
// GET /api/traces?service=…&limit=….
func FindTraces(ctx context.Context, uiURL, service string, limit int) ([]Trace, error) {
	var resp struct {
		Data []Trace `json:"data"`
	}
	q := url.Values{"service": {service}, "limit": {fmt.Sprint(limit)}, "lookback": {"1h"}}
	err := getJSON(ctx, uiURL+"/api/traces?"+q.Encode(), &resp)
	return resp.Data, err
}

func getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
