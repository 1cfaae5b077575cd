package gateway_test

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/pkg/engines"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/services/gateway"
)

type serverInfoJSON struct {
	Connection struct {
		Status    string `json:"status"`
		LatencyMs *int64 `json:"latencyMs"`
	} `json:"connection"`
	Models map[string]struct {
		Name      string `json:"name"`
		Engine    string `json:"engine"`
		Model     string `json:"model"`
		Voice     string `json:"voice"`
		Reachable bool   `json:"reachable"`
		URL       string `json:"url"`
		Error     string `json:"error"`
	} `json:"models"`
	MCPServers []struct {
		Name   string `json:"name"`
		Status string `json:"status"`
	} `json:"mcpServers"`
	VoiceAgents []struct {
		ID     string `json:"id"`
		VAD    string `json:"vad"`
		Detail string `json:"detail"`
	} `json:"voiceAgents"`
}

// fakeEspeak is a stand-in espeak-ng that runs with the voice en-us only.
func fakeEspeak(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "espeak-ng")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n[ \"$3\" = en-us ]\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestServerInfo: server-info, over REST and as the ServerInfo envelope
// that opens every WebSocket connection, names each engine and says
// whether it is usable — an ASR pointed at the LLM's server answers there
// but does not serve its model, so it is not.
func TestServerInfo(t *testing.T) {
	llm := fakeopenai.New(t, fakeopenai.WithAPIKey("llm-key-123"), fakeopenai.WithModels("qwen2.5-7b", "bge-m3"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String() + "/v1"
	ln.Close()
	s := newStack(t, func(o *stackOptions) {
		o.gateway = func(c *gateway.Config) {
			c.LLM = engines.Engine{URL: llm.URL(), Model: "qwen2.5-7b", APIKey: "llm-key-123"}
			c.ASR = engines.Engine{URL: llm.URL(), Model: "whisper-large-v3", APIKey: "llm-key-123"}
			c.TTS = engines.Engine{Kind: engines.Espeak, Path: fakeEspeak(t), Voice: "en-us"}
			c.Embeddings = engines.Engine{URL: down, Model: "bge-m3"}
		}
	})
	var info serverInfoJSON
	// An administrator sees each engine's URL and error (TestServerInfoForUsers: a user does not).
	s.call(t, adminKey, "GET", "/v1/server-info", nil).want(http.StatusOK, &info)
	if info.Connection.Status != "connected" || info.Connection.LatencyMs == nil || *info.Connection.LatencyMs < 0 {
		t.Fatalf("connection %+v", info.Connection)
	}
	m := info.Models
	if len(m) != 4 {
		t.Fatalf("models %+v", m)
	}
	if l := m["llm"]; !l.Reachable || l.Name != "qwen2.5-7b" || l.Engine != "openai" || l.Model != "qwen2.5-7b" || l.URL != llm.URL() || l.Error != "" {
		t.Fatalf("llm %+v", l)
	}
	if a := m["asr"]; a.Reachable || a.Name != "whisper-large-v3" || a.URL != llm.URL() ||
		a.Error != "reachable, but model whisper-large-v3 is not served (serves: qwen2.5-7b, bge-m3)" {
		t.Fatalf("asr %+v", a)
	}
	if tts := m["tts"]; !tts.Reachable || tts.Name != "espeak-ng (voice en-us)" || tts.Engine != "espeak" || tts.Voice != "en-us" ||
		tts.URL != "" || tts.Model != "" || tts.Error != "" {
		t.Fatalf("tts %+v", tts)
	}
	if e := m["embeddings"]; e.Reachable || e.Name != "bge-m3" || !strings.Contains(e.Error, "refused") {
		t.Fatalf("embeddings %+v", e)
	}
	if info.MCPServers == nil || len(info.MCPServers) != 0 {
		t.Fatalf("mcpServers %+v", info.MCPServers)
	}
	if info.VoiceAgents == nil || len(info.VoiceAgents) != 0 {
		t.Fatalf("voiceAgents %+v with no room-agent running", info.VoiceAgents)
	}
	s.call(t, "", "GET", "/v1/server-info", nil).wantError(http.StatusUnauthorized)

	// Each room-agent running is listed with the VAD it listens with; the
	// detail (a model's path, why the fallback listens) is an
	// administrator's; one stopped is no longer listed.
	stopNeural, err := rpc.AddVoiceAgent(s.nc, "0.1.0", "neural", "neural (Silero VAD, /opt/vad/silero_vad_v5.onnx)")
	if err != nil {
		t.Fatal(err)
	}
	stopEnergy, err := rpc.AddVoiceAgent(s.nc, "0.1.0", "energy", "energy, the fallback: libonnxruntime.so.1 not found")
	if err != nil {
		t.Fatal(err)
	}
	defer stopEnergy()
	s.call(t, adminKey, "GET", "/v1/server-info", nil).want(http.StatusOK, &info)
	vads := map[string]string{}
	for _, a := range info.VoiceAgents {
		if a.ID == "" {
			t.Fatalf("a voice agent without id: %+v", info.VoiceAgents)
		}
		vads[a.VAD] = a.Detail
	}
	if len(info.VoiceAgents) != 2 || !strings.HasPrefix(vads["neural"], "neural (Silero") || !strings.Contains(vads["energy"], "fallback") {
		t.Fatalf("an administrator's voiceAgents %+v", info.VoiceAgents)
	}
	r := s.call(t, aliceKey, "GET", "/v1/server-info", nil).want(http.StatusOK, &info)
	if len(info.VoiceAgents) != 2 || strings.Contains(string(r.body), "onnx") || strings.Contains(string(r.body), `"detail"`) {
		t.Fatalf("a user's voiceAgents: %s", r.body)
	}
	stopNeural()
	s.call(t, adminKey, "GET", "/v1/server-info", nil).want(http.StatusOK, &info)
	if len(info.VoiceAgents) != 1 || info.VoiceAgents[0].VAD != "energy" {
		t.Fatalf("after one stopped: %+v", info.VoiceAgents)
	}

	// The WebSocket's first frame carries the same.
	alice := s.dial(t, aliceKey)
	env := alice.info
	si, ok := env.Body.(*protocol.ServerInfo)
	if !ok || env.StanzaID != 0 || env.ConversationID != "" {
		t.Fatalf("first frame %+v, want an unstamped ServerInfo", env)
	}
	want := protocol.ServerInfoModels{
		LLM:        protocol.ModelStatus{Name: "qwen2.5-7b", Reachable: true},
		ASR:        protocol.ModelStatus{Name: "whisper-large-v3", Reachable: false},
		TTS:        protocol.ModelStatus{Name: "espeak-ng (voice en-us)", Reachable: true},
		Embeddings: protocol.ModelStatus{Name: "bge-m3", Reachable: false},
	}
	// A Whisper transcribes Whisper's languages (TestVoicesAndLanguages).
	if l := si.Models.ASR.Languages; len(l) < 99 || !slices.Contains(l, "en") {
		t.Fatalf("asr languages %v", l)
	}
	si.Models.ASR.Languages = nil
	if !reflect.DeepEqual(si.Models, want) || si.Connection.Status != "connected" || si.MCPServers == nil {
		t.Fatalf("ServerInfo %+v, want models %+v", si, want)
	}
	// Then the connection works as before.
	alice.send("", &protocol.Configuration{})
	if cfg, ok := alice.recv().Body.(*protocol.Configuration); !ok || cfg.ConversationID == nil {
		t.Fatalf("no Configuration reply after the ServerInfo: %+v", cfg)
	}
}
