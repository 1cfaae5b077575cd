package upcmd_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/devtools"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/localca"
	"github.com/alicia-voice/alicia/pkg/localpg"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
	"github.com/alicia-voice/alicia/pkg/testkit/uptest"
	"github.com/alicia-voice/alicia/services/cli/internal/upcmd"
)

var field = uptest.Field

// TestUpRunsTheStack starts `alicia up`, sends an envelope through its NATS
// and finds the row persistence wrote, checks the voice services run, then
// stops it as Ctrl-C would.
func TestUpRunsTheStack(t *testing.T) {
	devtools.Need(t, devtools.LiveKit)                    // up would spend minutes installing it
	if _, err := exec.LookPath("espeak-ng"); err != nil { // up's tts without ALICIA_TTS_URL
		testkit.Missing(t, "%v", err)
	}
	pgURL := pgtest.NewURL(t)
	t.Setenv("ALICIA_POSTGRES_URL", pgURL)
	t.Cleanup(func() { // up made the database's roles
		if err := localpg.DropRoles(context.Background(), pgURL); err != nil {
			t.Errorf("drop roles: %v", err)
		}
	})
	model := fakeopenai.New(t, fakeopenai.WithFallback(fakeopenai.Text("Hello from the stack.")))
	t.Setenv("ALICIA_LLM_URL", model.URL())
	t.Setenv("ALICIA_LLM_MODEL", "fake-chat")
	t.Setenv("ALICIA_EMBEDDING_URL", "")
	asrURL := "http://" + testkit.FreeAddr(t) + "/v1" // nothing listens there
	t.Setenv("ALICIA_ASR_URL", asrURL)
	for _, k := range []string{"ALICIA_TTS_URL", "ALICIA_TTS_ENGINE", "ALICIA_TTS_VOICE"} {
		t.Setenv(k, "") // espeak-ng
	}
	// Nothing serves speech or embeddings where up looks for them.
	noModels := "http://" + testkit.FreeAddr(t) + "/v1"
	// Loopback only: no LAN address of the machine in a test (LiveKit's
	// node IP, HTTPS).
	cfg := upcmd.Config{NATSURL: "nats://" + testkit.FreeAddr(t), DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0",
		LiveKit: upcmd.LiveKit{NodeIP: "127.0.0.1"}, HTTPS: upcmd.HTTPS{Addr: "127.0.0.1:0"},
		TTSProbeURL: noModels, EmbeddingProbeURL: noModels}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &testkit.SyncBuffer{}
	done := make(chan error, 1)
	logs := &testkit.SyncBuffer{}
	defer func() {
		if t.Failed() {
			t.Logf("alicia up's log:\n%s", logs.String())
		}
	}()
	// Up gives its services the stack's settings without touching the
	// process's environment (stackSource).
	env := os.Environ()
	slices.Sort(env)
	go func() { done <- upcmd.Run(ctx, cfg, out, logs) }()
	// The banner comes in parts: its last line says it is all there.
	testkit.Eventually(t, 30*time.Second, func() bool { return strings.Contains(out.String(), uptest.BannerEnd) }, "stack did not come up")
	if strings.Contains(out.String(), pgURL) {
		t.Fatal("the Postgres password was printed")
	}
	httpBase, key := field(out.String(), "HTTP:"), field(out.String(), "API key:")
	if !strings.HasPrefix(httpBase, "http://127.0.0.1:") || !strings.HasPrefix(key, "dev-") {
		t.Fatalf("output = %q", out.String())
	}
	req, _ := http.NewRequest(http.MethodGet, httpBase+"/readyz", nil)
	testkit.EventuallyNoError(t, 10*time.Second, func() error {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz %d", resp.StatusCode)
		}
		return nil
	}, "gateway not ready")
	req, _ = http.NewRequest(http.MethodGet, httpBase+"/v1/ws", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUpgradeRequired {
		t.Fatalf("the printed key was not accepted: %v %v", resp, err)
	}
	checkLiveKit(t, out.String(), httpBase, key, cfg.DataDir)
	checkHTTPS(t, out.String(), cfg.DataDir)
	checkServerInfo(t, httpBase, key, model.URL(), asrURL)

	// NATS has a user per service and refuses anyone else; the admin's
	// URL is in the data directory, readable only by its owner.
	if nc, err := nats.Connect(cfg.NATSURL); err == nil {
		nc.Close()
		t.Fatal("NATS accepted a connection without credentials")
	}
	adminFile := filepath.Join(cfg.DataDir, upcmd.AdminURLFile)
	if fi, err := os.Stat(adminFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin URL file: %v %v", fi, err)
	}
	adminURL, err := os.ReadFile(adminFile)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(strings.TrimSpace(string(adminURL)))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	pool, err := pgxpool.New(context.Background(), pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// The migrations ran as the database's migrator, not the superuser.
	var owner string
	if err := pool.QueryRow(context.Background(), `SELECT tableowner FROM pg_tables WHERE tablename = 'alicia_messages'`).Scan(&owner); err != nil ||
		!strings.HasSuffix(owner, "_migrator") {
		t.Fatalf("alicia_messages is owned by %q (%v), want the migrator role", owner, err)
	}
	testkit.EventuallyNoError(t, 30*time.Second, func() error {
		_, err := bus.NewPublisher(js).PublishClient(context.Background(), protocol.Envelope{StanzaID: 1, ConversationID: "ac_up", Type: protocol.TypeUserMessage,
			Body: &protocol.UserMessage{ID: "am_up", ConversationID: "ac_up", Content: "hello"}})
		return err
	}, "publish")
	testkit.Eventually(t, 30*time.Second, func() bool {
		var n int
		_ = pool.QueryRow(context.Background(), `SELECT count(*) FROM alicia_messages WHERE id = 'am_up' AND contents = 'hello'`).Scan(&n)
		return n == 1
	}, "persistence did not write the message")
	// The llm answered it through the model configured in the environment.
	testkit.Eventually(t, 30*time.Second, func() bool {
		var n int
		_ = pool.QueryRow(context.Background(), `SELECT count(*) FROM alicia_messages WHERE previous_id = 'am_up'
			AND message_role = 'assistant' AND completion_status = 'completed' AND contents = 'Hello from the stack.'`).Scan(&n)
		return n == 1
	}, "the llm did not answer")
	for _, want := range []string{"LLM:", model.URL(), "(fake-chat) reachable", "Embeddings: not configured: memory search and extraction are off (BAAI/bge-m3 not found at the default URL " + noModels} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q: %s", want, out.String())
		}
	}
	checkVoice(t, out.String(), nc, js, asrURL)

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("alicia up did not stop")
	}
	after := os.Environ()
	slices.Sort(after)
	if !slices.Equal(env, after) {
		t.Errorf("alicia up changed the process's environment:\nbefore %q\nafter  %q", env, after)
	}
	if !strings.Contains(out.String(), "Alicia stopped") {
		t.Fatalf("output = %q", out.String())
	}
	if _, err := http.Get(strings.Replace(field(out.String(), "LiveKit:"), "ws://", "http://", 1) + "/"); err == nil {
		t.Fatal("livekit-server still answers after up stopped")
	}
}

// checkLiveKit: up started livekit-server on 127.0.0.1, printed its URL,
// and gave the gateway its key and secret — a token the gateway hands out
// is one the server accepts.
func checkLiveKit(t *testing.T, out, httpBase, key, dataDir string) {
	t.Helper()
	lkURL := field(out, "LiveKit:")
	if !strings.HasPrefix(lkURL, "ws://127.0.0.1:") || !strings.Contains(out, "through the gateway's own origin") {
		t.Fatalf("LiveKit line in %q", out)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "livekit", "livekit-server.yaml")); err != nil {
		t.Fatalf("livekit-server config in the data dir: %v", err)
	}
	call := func(method, path string) *http.Response {
		req, _ := http.NewRequest(method, httpBase+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	var conv struct{ ID string }
	testkit.EventuallyNoError(t, 30*time.Second, func() error { // 503 until persistence answers
		resp := call(http.MethodPost, "/v1/conversations")
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return fmt.Errorf("create conversation: %s", resp.Status)
		}
		return json.NewDecoder(resp.Body).Decode(&conv)
	})
	resp := call(http.MethodPost, "/v1/conversations/"+conv.ID+"/token")
	var grant struct{ URL, Token, Room string }
	if err := json.NewDecoder(resp.Body).Decode(&grant); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("token: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	// One origin: the page's, the gateway forwarding the signalling.
	if want := strings.Replace(httpBase, "http://", "ws://", 1); grant.URL != want || grant.Room != "conv_"+conv.ID {
		t.Fatalf("grant %+v, want URL %s", grant, want)
	}
	validate := func(token string) int {
		resp, err := http.Get(strings.Replace(grant.URL, "ws://", "http://", 1) + "/rtc/validate?access_token=" + url.QueryEscape(token))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := validate(grant.Token); got != http.StatusOK {
		t.Fatalf("livekit-server's /rtc/validate of the gateway's token = %d, want 200", got)
	}
	if got := validate(grant.Token[:len(grant.Token)-4] + "AAAA"); got != http.StatusUnauthorized {
		t.Fatalf("/rtc/validate of a tampered token = %d, want 401", got)
	}
}

// checkHTTPS: up printed its HTTPS address, the CA it made in the data
// directory (key 0600) with its fingerprint and a QR code; a client
// trusting only that CA gets the web client and the CA page there.
func checkHTTPS(t *testing.T, out, dataDir string) {
	t.Helper()
	base := field(out, "HTTPS:")
	if !strings.HasPrefix(base, "https://127.0.0.1:") || !strings.Contains(out, "Scan to open "+base) || !strings.Contains(out, "█") {
		t.Fatalf("HTTPS lines in %q", out)
	}
	caFile := filepath.Join(dataDir, "tls", localca.CACert)
	if field(out, "CA:") != caFile {
		t.Fatalf("CA line in %q, want %s", out, caFile)
	}
	if fi, err := os.Stat(filepath.Join(dataDir, "tls", localca.CAKey)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("CA key: %v %v", fi, err)
	}
	ca, err := localca.ReadCA(caFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "SHA-256 "+localca.Fingerprint(ca)) {
		t.Fatalf("the CA's fingerprint is not in %q", out)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	for _, path := range []string{"/", "/ca"} {
		resp, err := hc.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s%s trusting only up's CA: %v", base, path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s%s: %s", base, path, resp.Status)
		}
	}
}

func TestConfigFromEnv(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte(strings.Repeat("s", 40)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		env     map[string]string
		want    upcmd.LiveKit
		wantErr string
	}{
		{name: "defaults (node IP: the LAN address found at start)", want: upcmd.LiveKit{Port: 7880, RTCTCPPort: 7881, RTCUDPPort: 7882}},
		{name: "node IP, ports and own credentials",
			env: map[string]string{"ALICIA_LIVEKIT_NODE_IP": "192.168.1.20", "ALICIA_LIVEKIT_PORT": "0", "ALICIA_LIVEKIT_RTC_UDP_PORT": "50000",
				"ALICIA_LIVEKIT_API_KEY": "APIk", "ALICIA_LIVEKIT_API_SECRET_FILE": secret},
			want: upcmd.LiveKit{NodeIP: "192.168.1.20", Port: 0, RTCTCPPort: 7881, RTCUDPPort: 50000, APIKey: "APIk", APISecret: strings.Repeat("s", 40)}},
		{name: "external server",
			env:  map[string]string{"ALICIA_LIVEKIT_URL": "wss://lk.example", "ALICIA_LIVEKIT_API_KEY": "k", "ALICIA_LIVEKIT_API_SECRET": "short-is-theirs"},
			want: upcmd.LiveKit{URL: "wss://lk.example", Port: 7880, RTCTCPPort: 7881, RTCUDPPort: 7882, APIKey: "k", APISecret: "short-is-theirs"}},
		{name: "external server without credentials", env: map[string]string{"ALICIA_LIVEKIT_URL": "wss://lk.example"}, wantErr: "ALICIA_LIVEKIT_API_KEY"},
		{name: "node IP that binds everything", env: map[string]string{"ALICIA_LIVEKIT_NODE_IP": "0.0.0.0"}, wantErr: "ALICIA_LIVEKIT_NODE_IP"},
		{name: "key without secret", env: map[string]string{"ALICIA_LIVEKIT_API_KEY": "k"}, wantErr: "ALICIA_LIVEKIT_API_SECRET"},
		{name: "short secret", env: map[string]string{"ALICIA_LIVEKIT_API_KEY": "k", "ALICIA_LIVEKIT_API_SECRET": "short"}, wantErr: "at least 32"},
		{name: "port out of range", env: map[string]string{"ALICIA_LIVEKIT_RTC_TCP_PORT": "70000"}, wantErr: "ALICIA_LIVEKIT_RTC_TCP_PORT"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"ALICIA_LIVEKIT_URL", "ALICIA_LIVEKIT_NODE_IP", "ALICIA_LIVEKIT_PORT", "ALICIA_LIVEKIT_RTC_TCP_PORT",
				"ALICIA_LIVEKIT_RTC_UDP_PORT", "ALICIA_LIVEKIT_API_KEY", "ALICIA_LIVEKIT_API_SECRET", "ALICIA_LIVEKIT_API_SECRET_FILE"} {
				t.Setenv(k, tt.env[k])
			}
			t.Setenv("ALICIA_DATA_DIR", t.TempDir())
			c, err := upcmd.ConfigFromEnv()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ConfigFromEnv = %v, want an error naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil || c.LiveKit != tt.want {
				t.Fatalf("LiveKit = %+v, %v; want %+v", c.LiveKit, err, tt.want)
			}
		})
	}
}
