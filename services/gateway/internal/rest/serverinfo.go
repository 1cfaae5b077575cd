package rest

import (
	"context"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/alicia-voice/alicia/pkg/engines"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/restapi"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/wake"
	"github.com/alicia-voice/alicia/services/gateway/internal/auth"
)

// Pinger answers when Postgres does.
type Pinger interface {
	Ping(ctx context.Context) error
}

// voiceAgentsWait is how long server-info gathers the room-agents' answers
// (each answers within a round trip; the probes of the models take longer).
const voiceAgentsWait = 300 * time.Millisecond

// serverInfo is GET /v1/server-info.
func (a *API) serverInfo(c echo.Context) error {
	info, err := a.info(c.Request().Context(), auth.IsAdmin(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, info)
}

// ServerInfo is the same report as a protocol body, for the WebSocket
// connection of a user (an administrator when admin is true). The envelope
// carries names and states only, whoever asks.
func (a *API) ServerInfo(ctx context.Context, admin bool) (*protocol.ServerInfo, error) {
	info, err := a.info(ctx, admin)
	if err != nil {
		return nil, err
	}
	model := func(name string) protocol.ModelStatus {
		m := info.Models[name]
		return protocol.ModelStatus{Name: m.Name, Reachable: m.Reachable}
	}
	body := &protocol.ServerInfo{
		Connection: protocol.ServerInfoConnection{Status: info.Connection.Status, LatencyMs: int32(min(info.Connection.LatencyMs, math.MaxInt32))},
		Models:     protocol.ServerInfoModels{LLM: model("llm"), ASR: model("asr"), TTS: model("tts"), Embeddings: model("embeddings")},
		MCPServers: make([]protocol.ServerInfoMCPServersElem, 0, len(info.MCPServers)),
		WakeWords:  info.WakeWords,
	}
	for _, s := range info.MCPServers {
		body.MCPServers = append(body.MCPServers, protocol.ServerInfoMCPServersElem{Name: s.Name, Status: s.Status})
	}
	body.Models.ASR.Languages, body.Models.TTS.Languages = info.Models["asr"].Languages, info.Models["tts"].Languages
	for _, v := range info.Voices {
		e := protocol.ServerInfoVoicesElem{ID: v.ID}
		if v.Language != "" {
			e.Language = protocol.Ptr(v.Language)
		}
		body.Voices = append(body.Voices, e)
	}
	return body, nil
}

// info reports what is really usable right now: the bus, Postgres, each
// model engine (probed) and the MCP servers' last known status. URLs and
// error texts, which name internal addresses, are for administrators only.
func (a *API) info(ctx context.Context, admin bool) (restapi.ServerInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var (
		wg     sync.WaitGroup
		models map[string]engines.Status
		conn   restapi.Connection
		agents []rpc.VoiceAgent
	)
	wg.Go(func() { models = a.Probe.Check(ctx) })
	wg.Go(func() { conn = a.connection(ctx) })
	var speech []engines.Voice
	if a.Prefs.Voices != nil {
		wg.Go(func() { speech = a.Prefs.Voices.Voices(ctx) })
	}
	wg.Go(func() {
		if a.NC.IsConnected() {
			agents, _ = rpc.VoiceAgents(ctx, a.NC, voiceAgentsWait)
		}
	})
	wg.Wait()
	info := restapi.ServerInfo{Connection: conn, Models: make(map[string]restapi.EngineInfo, len(models)),
		MCPServers: []restapi.MCPServerStatus{}, VoiceAgents: make([]restapi.VoiceAgent, 0, len(agents)), WakeWords: a.WakeWords}
	if len(info.WakeWords) == 0 {
		info.WakeWords = wake.DefaultWords
	}
	for _, va := range agents {
		v := restapi.VoiceAgent{ID: va.ID, Vad: restapi.VoiceAgentVad(va.VAD)}
		if admin {
			v.Detail = va.VADDetail
		}
		info.VoiceAgents = append(info.VoiceAgents, v)
	}
	for name, st := range models {
		m := restapi.EngineInfo{Name: st.Name, Engine: st.Kind, Model: st.Model, Voice: st.Voice, Reachable: st.Reachable}
		if admin {
			m.URL, m.Error = st.URL, st.Error
		}
		info.Models[name] = m
	}
	info.Voices = make([]restapi.SpeechVoice, 0, len(speech))
	for _, v := range speech {
		info.Voices = append(info.Voices, restapi.SpeechVoice{ID: v.ID, Name: v.Name, Language: v.Language})
	}
	if a.Prefs.Voices != nil {
		for name, langs := range map[string][]string{"tts": a.Prefs.Voices.SpeechLanguages(ctx), "asr": a.Prefs.Voices.TranscriptionLanguages()} {
			if m, ok := info.Models[name]; ok {
				m.Languages = langs
				info.Models[name] = m
			}
		}
	}
	if !admin {
		info.Connection.Error = ""
	}
	if conn.Status != "degraded" {
		servers, err := a.Store.MCPServers(ctx)
		if err != nil {
			return info, err
		}
		for _, s := range servers {
			info.MCPServers = append(info.MCPServers, restapi.MCPServerStatus{Name: s.Name, Status: s.Status})
		}
	}
	return info, nil
}

func (a *API) connection(ctx context.Context) restapi.Connection {
	if !a.NC.IsConnected() {
		return restapi.Connection{Status: "disconnected", Error: "NATS is not connected"}
	}
	rtt, err := a.NC.RTT()
	if err != nil {
		return restapi.Connection{Status: "disconnected", Error: "NATS: " + err.Error()}
	}
	conn := restapi.Connection{Status: "connected", LatencyMs: (rtt.Microseconds() + 999) / 1000}
	if err := a.Pinger.Ping(ctx); err != nil {
		conn.Status, conn.Error = "degraded", "Postgres: "+err.Error()
	}
	return conn
}
