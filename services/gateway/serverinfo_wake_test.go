package gateway_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/gateway"
)

// TestServerInfoWakeWords: server-info, over REST and in the WebSocket's
// first frame, lists the words that address Alicia in hands-free mode:
// ALICIA_WAKE_WORDS as the room-agent reads it, "alicia" when unset.
func TestServerInfoWakeWords(t *testing.T) {
	env := map[string]string{"ALICIA_POSTGRES_URL": "postgres://x@127.0.0.1/db", "ALICIA_API_KEYS": "me:0123456789abcdef",
		"ALICIA_WAKE_WORDS": " Alicia, Hey Computer "}
	cfg, err := gateway.ConfigFrom(config.Lookup("test", func(k string) (string, bool) { v, ok := env[k]; return v, ok }))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.WakeWords, []string{"alicia", "hey computer"}) {
		t.Fatalf("ALICIA_WAKE_WORDS read as %q", cfg.WakeWords)
	}
	for _, tc := range []struct {
		name  string
		words []string
		want  []string
	}{
		{"configured", cfg.WakeWords, []string{"alicia", "hey computer"}},
		{"default", nil, []string{"alicia"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(t, func(o *stackOptions) {
				o.gateway = func(c *gateway.Config) { c.WakeWords = tc.words }
			})
			var info struct {
				WakeWords []string `json:"wakeWords"`
			}
			s.call(t, aliceKey, "GET", "/v1/server-info", nil).want(http.StatusOK, &info)
			if !slices.Equal(info.WakeWords, tc.want) {
				t.Errorf("REST wakeWords %q, want %q", info.WakeWords, tc.want)
			}
			si, ok := s.dial(t, aliceKey).info.Body.(*protocol.ServerInfo)
			if !ok || !slices.Equal(si.WakeWords, tc.want) {
				t.Errorf("WebSocket ServerInfo %+v, want wakeWords %q", si, tc.want)
			}
		})
	}
}
