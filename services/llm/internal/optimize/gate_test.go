package optimize_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/services/llm/internal/optimize"
)

// TestGate: a run's request waits while a turn runs and goes once the last
// turn ends; with no turn it goes at once; a request whose context ends
// while it waits fails without reaching the server.
func TestGate(t *testing.T) {
	hits := make(chan struct{}, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits <- struct{}{} }))
	defer srv.Close()
	g := optimize.NewGate()
	hc := &http.Client{Transport: g.Transport(nil)}
	get := func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(context.Background()); err != nil {
		t.Fatalf("no turn running: %v", err)
	}
	<-hits

	leave1, leave2 := g.Enter(), g.Enter()
	sent := make(chan error, 1)
	go func() { sent <- get(context.Background()) }()
	leave1()
	leave1() // twice: counted once
	select {
	case <-hits:
		t.Fatal("a run's request went while a turn runs")
	case <-time.After(50 * time.Millisecond):
	}
	leave2()
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	<-hits

	leave := g.Enter()
	defer leave()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := get(ctx); err == nil {
		t.Fatal("a cancelled request waiting for the gate succeeded")
	}
	select {
	case <-hits:
		t.Fatal("a cancelled request reached the server")
	default:
	}
}
