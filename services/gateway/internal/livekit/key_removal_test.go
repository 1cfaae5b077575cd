package livekit_test

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	livekitpb "github.com/livekit/protocol/livekit"

	"github.com/alicia-voice/alicia/services/gateway"
)

const (
	bobKey = "bob-key-0123456789ab"
	// bobOtherKey is another key of bob's (his laptop's, say).
	bobOtherKey = "bob-laptop-key-0123456789"
)

// keyCall sends a request with key and decodes the answer into out.
func keyCall(t *testing.T, base, key, method, path string, want int, out any) {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, bytes.NewReader(nil))
	req.Header.Set("Authorization", "Bearer "+key)
	send(t, req, want, out)
}

// TestKeyRemovalLiveKit: removing bob's key from ALICIA_API_KEYS_FILE
// removes from their rooms the participants let in with a token of that
// key and with a token of a session opened with it; alice stays, and so
// does bob's participant let in with another key of his.
func TestKeyRemovalLiveKit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "api_keys")
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(path+".new", []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
	}
	write("alice:" + aliceKey + "\nbob:" + bobKey + "\nbob:" + bobOtherKey + "\n")
	base, _ := voiceStackWith(t, func(c *gateway.Config) {
		c.APIKeys, c.APIKeysFile = "alice:"+aliceKey+",bob:"+bobKey+",bob:"+bobOtherKey, path
	})

	var byKey, bySession, byOther, alices struct{ ID string }
	keyCall(t, base, bobKey, "POST", "/v1/conversations", http.StatusCreated, &byKey)
	keyCall(t, base, bobKey, "POST", "/v1/conversations", http.StatusCreated, &bySession)
	keyCall(t, base, bobOtherKey, "POST", "/v1/conversations", http.StatusCreated, &byOther)
	keyCall(t, base, aliceKey, "POST", "/v1/conversations", http.StatusCreated, &alices)

	var g grant
	keyCall(t, base, bobKey, "POST", "/v1/conversations/"+byKey.ID+"/token", http.StatusOK, &g)
	bobKeyed := join(t, g)
	resp := call(t, base, "POST", "/v1/session", "", map[string]string{"apiKey": bobKey}, http.StatusCreated, nil)
	var cookie string
	for _, c := range resp.Cookies() {
		cookie = c.Name + "=" + c.Value
	}
	call(t, base, "POST", "/v1/conversations/"+bySession.ID+"/token", cookie, nil, http.StatusOK, &g)
	bobSession := join(t, g)
	keyCall(t, base, aliceKey, "POST", "/v1/conversations/"+alices.ID+"/token", http.StatusOK, &g)
	alice := join(t, g)
	keyCall(t, base, bobOtherKey, "POST", "/v1/conversations/"+byOther.ID+"/token", http.StatusOK, &g)
	bobOther := join(t, g)

	at := time.Now()
	write("alice:" + aliceKey + "\nbob:" + bobOtherKey + "\n")
	waitLeft(t, bobKeyed, livekitpb.DisconnectReason_PARTICIPANT_REMOVED, at)
	waitLeft(t, bobSession, livekitpb.DisconnectReason_PARTICIPANT_REMOVED, at)
	for name, p := range map[string]joined{"alice": alice, "bob's other key": bobOther} {
		select {
		case <-p.left:
			t.Fatalf("%s left the room: %s", name, p.room.DisconnectReason())
		default:
		}
	}
	keyCall(t, base, bobKey, "POST", "/v1/conversations/"+byKey.ID+"/token", http.StatusUnauthorized, nil)
}
