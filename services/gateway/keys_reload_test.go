package gateway_test

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/services/gateway"
	"github.com/alicia-voice/alicia/services/gateway/internal/session"
)

const carolKey = "carol-key-0123456789a"

// writeKeys replaces the keys file as Kubernetes updates a mounted Secret
// and an editor saves: a new file renamed over the old one.
func writeKeys(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// keysFile writes the stack's three keys to a file, one a line, and
// returns its path and the option that makes a gateway read it.
func keysFile(t *testing.T) (string, func(*gateway.Config)) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "api_keys")
	writeKeys(t, path, "alice:"+aliceKey+"\nbob:"+bobKey+"\nroot:"+adminKey+"\n")
	return path, func(c *gateway.Config) { c.APIKeysFile = path }
}

// status is the status of GET path on base with key.
func status(t *testing.T, base, key, path string) int {
	t.Helper()
	return (&stack{base: base}).call(t, key, "GET", path, nil).status
}

// TestRemovingAKeyFromTheFile: rewriting ALICIA_API_KEYS_FILE without bob's
// key closes, on both replicas and without a restart, bob's WebSockets
// (4401, the one opened with the key "the API key was removed") and
// timeline stream, ends his web session in the bucket, and makes his key
// and his cookie a 401 on both replicas; alice's connections stay open. A
// key added to the file works at once.
func TestRemovingAKeyFromTheFile(t *testing.T) {
	path, withFile := keysFile(t)
	s := newStack(t, func(o *stackOptions) { o.gateway = withFile })
	other, _ := s.replica(t, nil, withFile)

	bobByKey := s.dial(t, bobKey)
	cookie, _ := signIn(t, s.base, bobKey)
	bobCID := s.newConversation(t, bobKey)
	bobBySession := dialSession(t, other, cookie)
	bobBySession.bind(bobCID)
	bobStream := openStream(t, other, cookie, bobCID, "", "")
	if bobStream.resp.StatusCode != http.StatusOK {
		t.Fatalf("bob's timeline stream: %d", bobStream.resp.StatusCode)
	}
	<-bobStream.comments
	aliceCID := s.newConversation(t, aliceKey)
	aliceByKey := s.dial(t, aliceKey)
	aliceByKey.bind(aliceCID)
	aliceCookie, _ := signIn(t, other, aliceKey)
	aliceBySession := dialSession(t, other, aliceCookie)
	aliceBySession.bind(aliceCID)
	for _, base := range []string{s.base, other} {
		if got := status(t, base, bobKey, "/v1/conversations"); got != http.StatusOK {
			t.Fatalf("bob's key before the removal: %d", got)
		}
	}

	at := time.Now()
	writeKeys(t, path, "alice:"+aliceKey+"\nroot:"+adminKey+"\n")
	byKey := bobByKey.waitClosed(4401, "the API key was removed", at)
	// Closed by the other replica's own reading of the file, or by the end
	// of the session the first replica removed: 4401 either way.
	bySession := bobBySession.waitClosed(4401, "", at)
	stream := bobStream.waitRevoked("", at)
	t.Logf("key removed from the file to closed: WebSocket by key %s, by session on the other replica %s, timeline stream %s",
		byKey, bySession, stream)
	if limit := 5 * time.Second; byKey > limit || bySession > limit || stream > limit {
		t.Fatalf("closed after %s, %s and %s: want about a second", byKey, bySession, stream)
	}

	// Each replica reads the file itself: the other may have closed bob's
	// connections on hearing his session end, before its own reading.
	for _, base := range []string{s.base, other} {
		testkit.Eventually(t, 5*time.Second, func() bool { return status(t, base, bobKey, "/v1/conversations") == http.StatusUnauthorized },
			"bob's removed key still works on %s", base)
		t.Logf("key removed from the file to bob's key refused on %s: %s", base, time.Since(at))
		(&stack{base: base}).call(t, bobKey, "GET", "/v1/conversations", nil).wantError(http.StatusUnauthorized)
		browserCall(t, base, cookie, base, "GET", "/v1/conversations", nil).wantError(http.StatusUnauthorized)
	}
	// The session is gone from the bucket, not only refused.
	kv, err := natstest.JetStream(t, s.nc).KeyValue(t.Context(), session.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(t.Context(), session.KeyOf(cookie)); !errors.Is(err, jetstream.ErrKeyNotFound) && !errors.Is(err, jetstream.ErrKeyDeleted) {
		t.Fatalf("bob's session in the bucket: %v, want it ended", err)
	}
	aliceByKey.alive()
	aliceBySession.alive()

	// A key added works at once, on both replicas.
	writeKeys(t, path, "alice:"+aliceKey+"\nroot:"+adminKey+"\ncarol:"+carolKey+"\n")
	for _, base := range []string{s.base, other} {
		testkit.Eventually(t, 5*time.Second, func() bool { return status(t, base, carolKey, "/v1/conversations") == http.StatusOK },
			"carol's new key does not work on %s", base)
	}
	aliceByKey.alive()
}

// TestMalformedKeysFileKeepsTheKeys: a keys file that does not parse, or
// cannot be read, leaves the keys in force and logs what is wrong (the
// line and entry, not the key); once corrected it is read again.
func TestMalformedKeysFileKeepsTheKeys(t *testing.T) {
	path, withFile := keysFile(t)
	s := newStack(t)
	var log testkit.SyncBuffer
	base, _ := s.replica(t, &log, withFile)
	alice := (&stack{base: base}).dial(t, aliceKey)

	// Written in place (as a compose secret must be: compose bind-mounts
	// the file): bob's key too short on line 2.
	if err := os.WriteFile(path, []byte("alice:"+aliceKey+"\nbob:short\nroot:"+adminKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, func() bool {
		out := log.String()
		return strings.Contains(out, "does not parse") && strings.Contains(out, `line 2, entry 1 (user \"bob\")`)
	}, "no error naming the line in the log: %s", log.String())
	for _, key := range []string{aliceKey, bobKey, adminKey} {
		if got := status(t, base, key, "/v1/conversations"); got != http.StatusOK {
			t.Fatalf("a key of the last good file after a malformed one: %d, want 200", got)
		}
	}

	// A file that cannot be read keeps them too.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return strings.Contains(log.String(), "cannot read the API keys") },
		"no error for a missing file in the log")
	if got := status(t, base, bobKey, "/v1/conversations"); got != http.StatusOK {
		t.Fatalf("bob's key while the file is missing: %d, want 200", got)
	}
	alice.alive()

	// Corrected: read again (bob removed, carol added).
	writeKeys(t, path, "alice:"+aliceKey+",carol:"+carolKey)
	testkit.Eventually(t, 5*time.Second, func() bool { return status(t, base, carolKey, "/v1/conversations") == http.StatusOK },
		"the corrected file was not read")
	if got := status(t, base, bobKey, "/v1/conversations"); got != http.StatusUnauthorized {
		t.Fatalf("bob's key after the corrected file: %d, want 401", got)
	}
	alice.alive()
	for _, secret := range []string{aliceKey, bobKey, carolKey} {
		if strings.Contains(log.String(), secret) {
			t.Errorf("the log shows a key (%q)", secret)
		}
	}
}

// TestKeysFilesFromEnv: the files the keys and administrators were read
// from are kept, to be read again; a key given in the variable itself
// wins over the file, which is then not read again either.
func TestKeysFilesFromEnv(t *testing.T) {
	dir := t.TempDir()
	keys, admins := filepath.Join(dir, "api_keys"), filepath.Join(dir, "admin_users")
	writeKeys(t, keys, "me:0123456789abcdef\n")
	writeKeys(t, admins, "me\n")
	t.Setenv("ALICIA_POSTGRES_URL", "postgres://x@127.0.0.1/db")
	t.Setenv("ALICIA_API_KEYS", "")
	t.Setenv("ALICIA_API_KEYS_FILE", keys)
	t.Setenv("ALICIA_ADMIN_USERS", "")
	t.Setenv("ALICIA_ADMIN_USERS_FILE", admins)
	c, err := gateway.ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if c.APIKeys != "me:0123456789abcdef" || c.APIKeysFile != keys || c.AdminUsers != "me" || c.AdminUsersFile != admins {
		t.Fatalf("keys %q from %q, administrators %q from %q", c.APIKeys, c.APIKeysFile, c.AdminUsers, c.AdminUsersFile)
	}
	t.Setenv("ALICIA_API_KEYS", "you:0123456789abcdef")
	if c, err := gateway.ConfigFromEnv(); err != nil || c.APIKeys != "you:0123456789abcdef" || c.APIKeysFile != "" {
		t.Fatalf("keys %q from %q: %v, want the variable's and no file", c.APIKeys, c.APIKeysFile, err)
	}
}

// TestAdminUsersFileReadAgain: ALICIA_ADMIN_USERS_FILE is read again too:
// a user named there becomes an administrator on the next request, and
// one taken out stops being one, without a restart.
func TestAdminUsersFileReadAgain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "admin_users")
	writeKeys(t, path, "root")
	s := newStack(t)
	base, _ := s.replica(t, nil, func(c *gateway.Config) { c.AdminUsers, c.AdminUsersFile = "root", path })
	cookie, _ := signIn(t, base, aliceKey)
	admin := func() bool {
		var got sessionJSON
		browserCall(t, base, cookie, base, "GET", "/v1/session", nil).want(http.StatusOK, &got)
		return got.Admin
	}
	if admin() {
		t.Fatal("alice is an administrator before the file names her")
	}
	writeKeys(t, path, "root,alice")
	testkit.Eventually(t, 5*time.Second, admin, "alice is not an administrator once the file names her")
	writeKeys(t, path, "root")
	testkit.Eventually(t, 5*time.Second, func() bool { return !admin() }, "alice is still an administrator once the file no longer names her")
}
