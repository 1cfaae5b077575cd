package probe_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/engines"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/gateway/internal/probe"
)

// backend is an OpenAI-compatible /v1/models that counts its calls.
type backend struct {
	srv   *httptest.Server
	calls atomic.Int32
	hold  chan struct{} // when not nil, answers wait for it
}

func newBackend(t *testing.T, key string, hold chan struct{}) *backend {
	b := &backend{hold: hold}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			http.NotFound(w, r)
			return
		}
		b.calls.Add(1)
		if b.hold != nil {
			select {
			case <-b.hold:
			case <-r.Context().Done():
				return
			}
		}
		if key != "" && r.Header.Get("Authorization") != "Bearer "+key {
			http.Error(w, `{"error":"bad key"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"chat","object":"model"},{"id":"tts","object":"model"}]}`))
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func closedPort(t *testing.T) string {
	return "http://" + testkit.FreeAddr(t) + "/v1" // nothing listens there
}

// fakeEspeak is a stand-in espeak-ng that runs with the voice en-us only.
func fakeEspeak(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "espeak-ng")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n[ \"$3\" = en-us ]\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheck(t *testing.T) {
	up := newBackend(t, "secret", nil)
	espeak := fakeEspeak(t)
	hung := newBackend(t, "", make(chan struct{}))
	t.Cleanup(func() { close(hung.hold) })
	p := probe.New(map[string]probe.Backend{
		"up":        {URL: up.srv.URL + "/v1/", Model: "chat", APIKey: "secret"},
		"wrong-key": {URL: up.srv.URL + "/v1", Model: "chat", APIKey: "nope"},
		"down":      {URL: closedPort(t), Model: "asr"},
		"hung":      {URL: hung.srv.URL + "/v1", Model: "tts"},
		"missing":   {Model: "emb"},
		"creds":     {URL: "http://user:pw@" + strings.TrimPrefix(up.srv.URL, "http://") + "/v1?x=1", Model: "chat", APIKey: "secret"},
		"unserved":  {URL: up.srv.URL + "/v1", Model: "whisper-large-v3", APIKey: "secret"},
		"speech":    {Kind: engines.OpenAI, URL: up.srv.URL + "/v1", Model: "tts", Voice: "af_sarah", APIKey: "secret"},
		"espeak":    {Kind: engines.Espeak, Path: espeak, Voice: "en-us"},
		"bad-voice": {Kind: engines.Espeak, Path: espeak, Voice: "xx"},
	}, probe.Options{Timeout: 300 * time.Millisecond})
	start := time.Now()
	got := p.Check(context.Background())
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("Check took %s: probes are not concurrent or not bounded", el)
	}
	for _, c := range []struct {
		name      string
		reachable bool
		errPart   string
	}{
		{"up", true, ""},
		{"wrong-key", false, "401"},
		{"down", false, "refused"},
		{"hung", false, "no answer within 300ms"},
		{"missing", false, engines.NotConfigured},
		{"creds", true, ""},
		{"unserved", false, "reachable, but model whisper-large-v3 is not served (serves: chat, tts)"},
		{"speech", true, ""},
		{"espeak", true, ""},
		{"bad-voice", false, "espeak-ng with voice xx failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := got[c.name]
			if st.Reachable != c.reachable || !strings.Contains(st.Error, c.errPart) || (c.errPart == "" && st.Error != "") {
				t.Fatalf("%+v", st)
			}
			local := c.name == "espeak" || c.name == "bad-voice"
			if (c.name == "missing" || local) != (st.URL == "") {
				t.Fatalf("url %q", st.URL)
			}
			if strings.Contains(st.URL, "pw") || strings.Contains(st.URL, "x=1") {
				t.Fatalf("url shows credentials or query: %q", st.URL)
			}
		})
	}
	for name, want := range map[string]string{"up": "chat", "missing": "emb", "speech": "tts (voice af_sarah)",
		"espeak": "espeak-ng (voice en-us)", "bad-voice": "espeak-ng (voice xx)"} {
		if got[name].Name != want {
			t.Errorf("%s: name %q, want %q", name, got[name].Name, want)
		}
	}
}

func TestCacheAndSharedProbe(t *testing.T) {
	hold := make(chan struct{})
	b := newBackend(t, "", hold)
	p := probe.New(map[string]probe.Backend{"llm": {URL: b.srv.URL + "/v1", Model: "chat"}}, probe.Options{TTL: 200 * time.Millisecond})
	// Concurrent checks while a probe is in flight share it.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if st := p.Check(context.Background())["llm"]; !st.Reachable {
				t.Errorf("%+v", st)
			}
		})
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return b.calls.Load() > 0 }, "the first probe did not reach the backend")
	close(hold)
	wg.Wait()
	if n := b.calls.Load(); n != 1 {
		t.Fatalf("%d probes for concurrent checks, want 1", n)
	}
	// Within the TTL: cached.
	p.Check(context.Background())
	if n := b.calls.Load(); n != 1 {
		t.Fatalf("%d probes within the TTL, want 1", n)
	}
	// After it: probed again, and a backend that went down is reported.
	b.srv.Close()
	testkit.Eventually(t, 5*time.Second, func() bool { return !p.Check(context.Background())["llm"].Reachable },
		"a backend that went down is still reachable after the TTL")
}

func TestAbandonedCheckDoesNotPoisonTheCache(t *testing.T) {
	hold := make(chan struct{})
	b := newBackend(t, "", hold)
	p := probe.New(map[string]probe.Backend{"llm": {URL: b.srv.URL + "/v1", Model: "chat"}}, probe.Options{})
	first := make(chan engines.Status, 1)
	go func() { first <- p.Check(context.Background())["llm"] }()
	testkit.Eventually(t, 5*time.Second, func() bool { return b.calls.Load() > 0 }, "the first probe did not reach the backend")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if st := p.Check(ctx)["llm"]; st.Reachable || !strings.Contains(st.Error, "abandoned") || st.Name != "chat" {
		t.Fatalf("cancelled check = %+v", st)
	}
	close(hold)
	if st := <-first; !st.Reachable {
		t.Fatalf("first = %+v", st)
	}
	if st := p.Check(context.Background())["llm"]; !st.Reachable || b.calls.Load() != 1 {
		t.Fatalf("cached = %+v after %d calls", st, b.calls.Load())
	}
}
