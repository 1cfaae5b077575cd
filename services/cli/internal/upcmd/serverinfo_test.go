package upcmd_test

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// checkServerInfo: the gateway up runs in its process describes the engines
// up runs — espeak-ng, as no speech server is set, the ASR model at its
// unreachable URL and the LLM — over REST and in the ServerInfo envelope
// that opens a WebSocket connection.
func checkServerInfo(t *testing.T, httpBase, key, llmURL, asrURL string) {
	t.Helper()
	type model struct {
		Name, Engine, Voice, URL, Error string
		Reachable                       bool
	}
	var info struct{ Models map[string]model }
	req, _ := http.NewRequest(http.MethodGet, httpBase+"/v1/server-info", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("server-info: %s %v", resp.Status, err)
	}
	if m := info.Models["tts"]; m.Name != "espeak-ng (voice en-us)" || m.Engine != "espeak" || m.Voice != "en-us" || !m.Reachable {
		t.Errorf("server-info tts %+v, want espeak-ng (voice en-us), reachable", m)
	}
	if m := info.Models["asr"]; m.Name != "whisper-large-v3" || m.URL != asrURL || m.Reachable || !strings.Contains(m.Error, "refused") {
		t.Errorf("server-info asr %+v, want whisper-large-v3 at %s, unreachable", m, asrURL)
	}
	if m := info.Models["llm"]; m.Name != "fake-chat" || m.URL != llmURL || !m.Reachable {
		t.Errorf("server-info llm %+v, want fake-chat at %s, reachable", m, llmURL)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, strings.Replace(httpBase, "http", "ws", 1)+"/v1/ws?token="+key, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	_, frame, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	env, err := protocol.Decode(frame)
	if err != nil {
		t.Fatal(err)
	}
	si, ok := env.Body.(*protocol.ServerInfo)
	if !ok {
		t.Fatalf("first WebSocket frame %+v, want ServerInfo", env)
	}
	want := protocol.ServerInfoModels{
		LLM:        protocol.ModelStatus{Name: "fake-chat", Reachable: true},
		ASR:        protocol.ModelStatus{Name: "whisper-large-v3"},
		TTS:        protocol.ModelStatus{Name: "espeak-ng (voice en-us)", Reachable: true},
		Embeddings: protocol.ModelStatus{Name: "BAAI/bge-m3"},
	}
	// The languages: Whisper's (the asr's model is a Whisper) and those of
	// espeak-ng's voices; their lists are the engines' own.
	got := si.Models
	if !slices.Contains(got.ASR.Languages, "fr") || !slices.Contains(got.TTS.Languages, "fr-FR") {
		t.Errorf("languages asr %v, tts %v: want French in both", got.ASR.Languages, got.TTS.Languages)
	}
	got.ASR.Languages, got.TTS.Languages = nil, nil
	for _, m := range []*protocol.ModelStatus{&got.ASR, &got.TTS, &got.LLM, &got.Embeddings} {
		if len(m.Languages) == 0 {
			m.Languages = nil
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ServerInfo models %+v, want %+v", si.Models, want)
	}
}
