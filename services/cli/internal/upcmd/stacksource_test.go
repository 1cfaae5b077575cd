package upcmd

import (
	"context"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/engines"
	"github.com/alicia-voice/alicia/services/tts"
)

// TestUpLeavesTheEnvironment: up configures its services from the
// environment with its stack's values laid over it (stackSource), and
// what it finds at the default model URLs over that: the process's
// environment is the same afterwards, and two stacks configured in one
// process with different values each get their own.
func TestUpLeavesTheEnvironment(t *testing.T) {
	stackEnv(t, fakeEspeak(t), nil)
	// Up's values win over these, which stay in the environment.
	t.Setenv("ALICIA_NATS_USER", "env-user")
	t.Setenv("ALICIA_NATS_PASSWORD", "env-password")
	t.Setenv("ALICIA_ADMIN_USERS", "env-admin")
	t.Setenv("ALICIA_HTTPS_ADDR", "127.0.0.1:9443")
	before := environ()

	models := newModelServer(t, engines.DefaultTTSModel, engines.DefaultEmbeddingModel)
	secret := strings.Repeat("s", 32)
	type stack struct {
		cfg      Config
		pgURL    string
		lk       liveKitStack
		devAdmin bool
	}
	a := stack{cfg: Config{NATSURL: "nats://127.0.0.1:14222", HTTPAddr: "127.0.0.1:18080", APIKeys: "dev:0123456789abcdef",
		TTSProbeURL: strings.TrimSuffix(models.url, "/v1"), EmbeddingProbeURL: models.url},
		pgURL: "postgres://a@127.0.0.1/a", lk: liveKitStack{URL: "ws://127.0.0.1:17880", APIKey: "APIa", APISecret: secret}, devAdmin: true}
	b := stack{cfg: Config{NATSURL: "nats://127.0.0.1:24222", HTTPAddr: "127.0.0.1:28080", APIKeys: "me:fedcba9876543210"},
		pgURL: "postgres://b@127.0.0.1/b", lk: liveKitStack{URL: "ws://127.0.0.1:27880", APIKey: "APIb", APISecret: secret}}
	var got [2]stackConfig
	for i, s := range []stack{a, b} {
		sc, err := configure(context.Background(), s.cfg, newNATSUsers(), stackSource(config.Environ(), s.cfg, s.pgURL, s.lk, s.devAdmin))
		if err != nil {
			t.Fatalf("stack %d: %v", i, err)
		}
		got[i] = sc
	}
	if after := environ(); !slices.Equal(before, after) {
		t.Fatalf("configuring changed the environment:\nbefore %q\nafter  %q", before, after)
	}

	for i, s := range []stack{a, b} {
		sc := got[i]
		for name, u := range map[string]string{"persistence": sc.persistence.NATSURL, "gateway": sc.gateway.NATSURL,
			"llm": sc.llm.NATSURL, "memory": sc.memory.NATSURL} {
			if u != s.cfg.NATSURL {
				t.Errorf("stack %d: %s's NATS URL %q, want %q", i, name, u, s.cfg.NATSURL)
			}
		}
		for name, u := range map[string]string{"asr": sc.voice.asr.NATSURL, "tts": sc.voice.tts.NATSURL} {
			if p, err := url.Parse(u); err != nil || p.Host != strings.TrimPrefix(s.cfg.NATSURL, "nats://") || p.User.Username() != name {
				t.Errorf("stack %d: %s's NATS URL %q, want %s's user at %s", i, name, u, name, s.cfg.NATSURL)
			}
		}
		if sc.gateway.NATSAuth.User != "" || sc.gateway.NATSAuth.Password != "" || sc.llm.NATSAuth.Password != "" {
			t.Errorf("stack %d: the environment's NATS user reached the services: %+v", i, sc.gateway.NATSAuth)
		}
		for name, u := range map[string]string{"persistence": sc.persistence.PostgresURL, "gateway": sc.gateway.PostgresURL,
			"llm": sc.llm.PostgresURL, "memory": sc.memory.PostgresURL} {
			if u != s.pgURL {
				t.Errorf("stack %d: %s's Postgres URL %q, want %q", i, name, u, s.pgURL)
			}
		}
		g := sc.gateway
		if g.HTTPAddr != s.cfg.HTTPAddr || g.APIKeys != s.cfg.APIKeys || g.LiveKit.URL != s.lk.URL || g.LiveKit.APIKey != s.lk.APIKey || g.TLS.Enabled() {
			t.Errorf("stack %d: gateway %s keys %q LiveKit %s/%s TLS %v", i, g.HTTPAddr, g.APIKeys, g.LiveKit.URL, g.LiveKit.APIKey, g.TLS.Addrs)
		}
		if want := map[bool]string{true: "dev", false: "env-admin"}[s.devAdmin]; g.AdminUsers != want {
			t.Errorf("stack %d: administrators %q, want %q", i, g.AdminUsers, want)
		}
	}
	// What up found at the default URLs is each stack's own: a's models
	// server, none for b (espeak-ng, no memory search).
	if e := got[0].voice.tts; e.Engine != tts.EngineOpenAI || e.URL != a.cfg.TTSProbeURL || got[0].memory.EmbeddingURL != models.url ||
		got[0].gateway.TTS.Kind != tts.EngineOpenAI {
		t.Errorf("stack a: tts %s at %s, embeddings %q, server-info %s", e.Engine, e.URL, got[0].memory.EmbeddingURL, got[0].gateway.TTS.Kind)
	}
	if e := got[1].voice.tts; e.Engine != tts.EngineEspeak || got[1].memory.EmbeddingURL != "" || got[1].gateway.TTS.Kind != tts.EngineEspeak {
		t.Errorf("stack b: tts %s, embeddings %q, server-info %s", e.Engine, got[1].memory.EmbeddingURL, got[1].gateway.TTS.Kind)
	}
}

// environ is the process's environment, sorted.
func environ() []string {
	e := os.Environ()
	slices.Sort(e)
	return e
}
