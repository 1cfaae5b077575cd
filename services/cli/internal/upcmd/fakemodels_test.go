package upcmd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/devtools"
	"github.com/alicia-voice/alicia/pkg/engines"
	"github.com/alicia-voice/alicia/pkg/localpg"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
	"github.com/alicia-voice/alicia/services/cli/internal/api"
	"github.com/alicia-voice/alicia/services/cli/internal/chatcmd"
	"github.com/alicia-voice/alicia/services/cli/internal/devcmd"
	"github.com/alicia-voice/alicia/services/cli/internal/upcmd"
)

// TestUpWithFakeModels is the newcomer's two terminals: `alicia dev
// fake-models`, then `alicia up` with no model variable for speech or
// memory. Up finds the speech server and the embedding model where
// fake-models serves them (the default URLs, injected here: the real ones
// may be taken on a test machine), says so, and the product works: a chat
// answer, a memory extracted from it and found by search, that memory used
// by the next answer, and a voice answer spoken by the speech server.
func TestUpWithFakeModels(t *testing.T) {
	devtools.Need(t, devtools.LiveKit)
	addr := testkit.FreeAddr(t)
	base := "http://" + addr + "/v1"
	fake := devcmd.FakeModelsConfig{ // the defaults' layout: everything on one host:port
		LLM: devcmd.FakeBackend{URL: base, Model: engines.DefaultLLMModel}, ASR: devcmd.FakeBackend{URL: base, Model: engines.DefaultASRModel},
		TTS: devcmd.FakeBackend{URL: "http://" + addr, Model: engines.DefaultTTSModel}, Embeddings: devcmd.FakeBackend{Model: engines.DefaultEmbeddingModel},
		WordDelay: time.Millisecond,
	}
	fctx, stopFake := context.WithCancel(context.Background())
	fakeDone := make(chan error, 1)
	go func() { fakeDone <- devcmd.FakeModels(fctx, fake, &testkit.SyncBuffer{}) }()
	t.Cleanup(func() { stopFake(); <-fakeDone })

	pgURL := pgtest.NewURL(t)
	t.Setenv("ALICIA_POSTGRES_URL", pgURL)
	t.Cleanup(func() {
		if err := localpg.DropRoles(context.Background(), pgURL); err != nil {
			t.Errorf("drop roles: %v", err)
		}
	})
	// The LLM's and the ASR's URLs have no lookup: up uses their defaults,
	// which this test cannot take, so it names them as fake-models' are.
	t.Setenv("ALICIA_LLM_URL", base)
	t.Setenv("ALICIA_ASR_URL", base)
	for _, k := range []string{"ALICIA_LLM_MODEL", "ALICIA_ASR_MODEL", "ALICIA_TTS_URL", "ALICIA_TTS_ENGINE", "ALICIA_TTS_MODEL", "ALICIA_TTS_VOICE",
		"ALICIA_EMBEDDING_URL", "ALICIA_EMBEDDING_MODEL", "ALICIA_NATS_URL", "ALICIA_HTTP_ADDR", "ALICIA_API_KEYS",
		"ALICIA_LIVEKIT_URL", "ALICIA_LIVEKIT_API_KEY", "ALICIA_LIVEKIT_API_SECRET"} {
		t.Setenv(k, "") // unset: the stack's own, or what up finds at the default URLs
	}
	// Loopback only: no LAN address of the machine in a test (LiveKit's
	// node IP, HTTPS).
	cfg := upcmd.Config{NATSURL: "nats://" + testkit.FreeAddr(t), DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0",
		LiveKit: upcmd.LiveKit{NodeIP: "127.0.0.1"}, HTTPS: upcmd.HTTPS{Addr: "127.0.0.1:0"},
		TTSProbeURL: fake.TTS.URL, EmbeddingProbeURL: base}
	ctx, cancel := context.WithCancel(context.Background())
	out, logs := &testkit.SyncBuffer{}, &testkit.SyncBuffer{}
	done := make(chan error, 1)
	go func() { done <- upcmd.Run(ctx, cfg, out, logs) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("alicia up: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("alicia up did not stop")
		}
		if t.Failed() {
			t.Logf("alicia up's output:\n%s\nits log:\n%s", out.String(), logs.String())
		}
	}()
	testkit.Eventually(t, 30*time.Second, func() bool { return strings.Contains(out.String(), "Ctrl-C stops.") }, "stack did not come up")
	for label, want := range map[string]string{
		"LLM:":        base + " (" + engines.DefaultLLMModel + ") reachable",
		"ASR:":        base + " (" + engines.DefaultASRModel + ") reachable",
		"TTS:":        base + " (kokoro, voice af_sarah) reachable (found at the default URL; set ALICIA_TTS_URL to choose)",
		"Embeddings:": base + " (BAAI/bge-m3) reachable (found at the default URL; set ALICIA_EMBEDDING_URL to choose)",
	} {
		if l := line(out.String(), label); strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), label)) != want {
			t.Errorf("banner line %q, want %s %s", l, label, want)
		}
	}
	httpBase, key := field(out.String(), "HTTP:"), field(out.String(), "API key:")
	client, err := api.New(httpBase, key)
	if err != nil {
		t.Fatal(err)
	}

	// Text: the canned answer, which the memory service reads for a memory.
	said := chat(t, client, "", "Please remember that I am allergic to peanuts.")
	if !strings.Contains(said, devcmd.CannedMarker) {
		t.Fatalf("chat printed %q, want the canned answer", said)
	}
	page, err := client.ListConversations(t.Context(), api.ListOptions{})
	if err != nil || len(page.Conversations) != 1 {
		t.Fatalf("conversations %+v, %v", page, err)
	}
	cid := page.Conversations[0].ID
	// Memory: extracted after the answer, embedded, found by search.
	testkit.EventuallyNoError(t, 30*time.Second, func() error {
		var found struct{ Memories []struct{ Content string } }
		if err := getJSON(httpBase, key, "/v1/memories?q="+url.QueryEscape("allergic to peanuts"), &found); err != nil {
			return err
		}
		if len(found.Memories) == 0 || !strings.Contains(found.Memories[0].Content, "allergic to peanuts") {
			return fmt.Errorf("memory search found %+v", found.Memories)
		}
		return nil
	}, "the memory was not extracted, or search is off")
	if said := chat(t, client, cid, "Am I allergic to peanuts?"); !strings.Contains(said, "[memory]") || !strings.Contains(said, "allergic to peanuts") {
		t.Errorf("the second answer used no memory: %q", said)
	}

	// Voice: a voice answer to the first message is spoken by the speech server.
	conv, _, err := client.GetConversation(t.Context(), cid)
	if err != nil || len(conv.Messages) == 0 {
		t.Fatalf("conversation %+v, %v", conv, err)
	}
	adminURL, err := os.ReadFile(filepath.Join(cfg.DataDir, upcmd.AdminURLFile))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(strings.TrimSpace(string(adminURL)))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	checkSpeaks(t, nc, js, cid, conv.Messages[0].ID, "am_upfaketts")
}

// chat sends one message in conversation cid ("" for a new one) as
// `alicia chat` does with piped input, and returns what it printed.
func chat(t *testing.T, client *api.Client, cid, message string) string {
	t.Helper()
	var out, errs testkit.SyncBuffer
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := chatcmd.Run(ctx, chatcmd.Options{API: client, ConversationID: cid, In: strings.NewReader(message + "\n"), Out: &out, Err: &errs}); err != nil {
		t.Fatalf("chat: %v\n%s\n%s", err, out.String(), errs.String())
	}
	return out.String()
}

func getJSON(base, key, path string, v any) error {
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
