package roomagent_test

import (
	"strings"
	"testing"
	"time"

	roomagent "github.com/alicia-voice/alicia/services/room-agent"
)

// TestQuotaConfig: the utterance cap may not exceed what one stored
// AudioChunk holds, and the edge limits come from the environment.
func TestQuotaConfig(t *testing.T) {
	t.Setenv("ALICIA_LIVEKIT_URL", "ws://127.0.0.1:7880")
	t.Setenv("ALICIA_LIVEKIT_API_KEY", "k")
	t.Setenv("ALICIA_LIVEKIT_API_SECRET", "s")
	t.Setenv("ALICIA_EDGE_RATE", "5")
	t.Setenv("ALICIA_CLIENT_META_KEYS", "timestamp, source")
	c, err := roomagent.ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if c.Edge.SessionRate != 5 || len(c.Edge.MetaKeys) != 2 || c.MaxUtterance != 25*time.Second {
		t.Fatalf("config %+v", c.Edge)
	}
	t.Setenv("ALICIA_VAD_MAX_UTTERANCE", "10m")
	if _, err := roomagent.ConfigFromEnv(); err == nil || !strings.Contains(err.Error(), "ALICIA_VAD_MAX_UTTERANCE") {
		t.Fatalf("err = %v, want the utterance cap refused", err)
	}
}
