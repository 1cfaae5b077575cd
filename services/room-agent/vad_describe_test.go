package roomagent_test

import (
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/config"

	roomagent "github.com/alicia-voice/alicia/services/room-agent"
)

// TestVADChoice: auto listens with the neural VAD where its runtime is (task
// deps installs it), and says so; a runtime that is not there is the energy
// VAD under auto, and a refusal to start under neural.
func TestVADChoice(t *testing.T) {
	cfg := roomagent.DefaultConfig()
	if d := roomagent.DescribeVAD(cfg); !strings.HasPrefix(d, "neural (Silero VAD") {
		t.Fatalf("auto: %q (is deploy/vad installed? task deps)", d)
	}
	m, kind, err := roomagent.LoadVAD(cfg, zerolog.Nop())
	if err != nil || m == nil || kind != roomagent.VADNeural {
		t.Fatalf("auto: %v %q %v", m, kind, err)
	}
	m.Close()

	cfg.VADModel, cfg.ONNXRuntimeLib = "/nonexistent/silero.onnx", "/nonexistent/libonnxruntime.so.1"
	if d := roomagent.DescribeVAD(cfg); !strings.HasPrefix(d, "energy, the fallback") {
		t.Fatalf("auto without the runtime: %q", d)
	}
	if m, kind, err := roomagent.LoadVAD(cfg, zerolog.Nop()); err != nil || m != nil || kind != roomagent.VADEnergy {
		t.Fatalf("auto without the runtime: %v %q %v", m, kind, err)
	}
	cfg.VAD = roomagent.VADNeural
	if _, _, err := roomagent.LoadVAD(cfg, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "ALICIA_VAD=neural") {
		t.Fatalf("neural without the runtime: %v", err)
	}
	cfg.VAD = roomagent.VADEnergy
	if d := roomagent.DescribeVAD(cfg); !strings.HasPrefix(d, "energy (ALICIA_VAD=energy)") {
		t.Fatalf("energy: %q", d)
	}
	src := config.Lookup("test", func(string) (string, bool) { return "", false }).Overlay("test", map[string]string{
		"ALICIA_VAD": "silero", "ALICIA_LIVEKIT_URL": "ws://127.0.0.1:7880", "ALICIA_LIVEKIT_API_KEY": "k", "ALICIA_LIVEKIT_API_SECRET": "s"})
	if _, err := roomagent.ConfigFrom(src); err == nil || !strings.Contains(err.Error(), "ALICIA_VAD") {
		t.Fatalf("ALICIA_VAD=silero: %v", err)
	}
}
