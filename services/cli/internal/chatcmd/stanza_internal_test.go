package chatcmd

import (
	"encoding/json"
	"testing"
	"time"
)

// TestFirstStanza: a resumed chat numbers its envelopes after the last
// client stanza id the gateway stored, and, when the gateway does not
// report one, above any earlier session's (seconds since stanzaEpoch).
func TestFirstStanza(t *testing.T) {
	now := time.Now()
	since := int32(now.Sub(stanzaEpoch) / time.Second)
	for _, c := range []struct {
		name string
		raw  string
		want int32
	}{
		{"not reported", `{"id":"ac_chat","status":"active","messages":[]}`, since},
		{"reported", `{"id":"ac_chat","lastClientStanzaId":41,"messages":[]}`, 42},
		{"none stored", `{"id":"ac_chat","lastClientStanzaId":0,"messages":[]}`, 1},
		{"out of range", `{"id":"ac_chat","lastClientStanzaId":-3,"messages":[]}`, since},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := firstStanza(reportedStanza(json.RawMessage(c.raw)), now); got != c.want {
				t.Fatalf("first stanza %d, want %d", got, c.want)
			}
		})
	}
}
