package roomagent_test

import (
	"testing"
	"time"

	roomagent "github.com/alicia-voice/alicia/services/room-agent"
)

// TestEndOfTurnConfig: the adaptive end of turn is on by default with its
// bounds around the end silence, comes from the environment, and refuses
// bounds that do not hold the end silence.
func TestEndOfTurnConfig(t *testing.T) {
	t.Setenv("ALICIA_LIVEKIT_URL", "ws://127.0.0.1:7880")
	t.Setenv("ALICIA_LIVEKIT_API_KEY", "k")
	t.Setenv("ALICIA_LIVEKIT_API_SECRET", "s")
	c, err := roomagent.ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if !c.AdaptiveEnd || c.EndSilenceMin != 300*time.Millisecond || c.EndSilenceMax != time.Second {
		t.Fatalf("defaults: adaptive %v, min %v, max %v", c.AdaptiveEnd, c.EndSilenceMin, c.EndSilenceMax)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		ok   bool
	}{
		{"set", map[string]string{"ALICIA_VAD_END_SILENCE_MIN": "200ms", "ALICIA_VAD_END_SILENCE_MAX": "1500ms"}, true},
		{"min above the end silence", map[string]string{"ALICIA_VAD_END_SILENCE_MIN": "600ms"}, false},
		{"max below the end silence", map[string]string{"ALICIA_VAD_END_SILENCE_MAX": "400ms"}, false},
		{"min below a frame", map[string]string{"ALICIA_VAD_END_SILENCE_MIN": "10ms"}, false},
		{"zero min", map[string]string{"ALICIA_VAD_END_SILENCE_MIN": "0s"}, false},
		{"end silence beyond the max", map[string]string{"ALICIA_VAD_END_SILENCE": "2s"}, false},
		{"off: the bounds do not matter", map[string]string{"ALICIA_VAD_ADAPTIVE_END": "false", "ALICIA_VAD_END_SILENCE": "2s"}, true},
		{"bad switch", map[string]string{"ALICIA_VAD_ADAPTIVE_END": "maybe"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			c, err := roomagent.ConfigFromEnv()
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok %v", err, tc.ok)
			}
			if v, set := tc.env["ALICIA_VAD_ADAPTIVE_END"]; err == nil && set && c.AdaptiveEnd != (v == "true") {
				t.Fatalf("adaptive %v from %q", c.AdaptiveEnd, v)
			}
		})
	}
}
