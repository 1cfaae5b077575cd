package session_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/services/gateway/internal/session"
)

func open(t *testing.T, js jetstream.JetStream, ttl time.Duration) *session.Store {
	t.Helper()
	return openWith(t, js, session.Config{TTL: ttl, PerUser: 20})
}

func openWith(t *testing.T, js jetstream.JetStream, cfg session.Config) *session.Store {
	t.Helper()
	st, err := session.Open(context.Background(), js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestSessions(t *testing.T) {
	ns := natstest.Run(t)
	js := natstest.JetStream(t, natstest.Connect(t, ns))
	ctx := context.Background()
	st := open(t, js, 7*24*time.Hour)

	id, rec, err := st.Create(ctx, "alice", "fp-alice")
	if err != nil {
		t.Fatal(err)
	}
	if len(id) != 43 || strings.ContainsAny(id, "+/=") {
		t.Fatalf("id %q is not 32 bytes of base64url", id)
	}
	if rec.User != "alice" || rec.KeyFingerprint != "fp-alice" || rec.ExpiresAt-rec.CreatedAt != (7*24*time.Hour).Milliseconds() {
		t.Fatalf("record %+v", rec)
	}
	got, err := st.Lookup(ctx, id)
	if err != nil || got != rec {
		t.Fatalf("lookup %+v, %v", got, err)
	}
	other, _, err := st.Create(ctx, "alice", "fp-alice")
	if err != nil || other == id {
		t.Fatalf("second session %q, %v", other, err)
	}

	// The bucket: history 1, entries kept as long as a session, on file,
	// 64 MiB, keyed by the id's hash; neither keys nor values hold the id.
	// Besides the two sessions, alice's index of them.
	kv, err := js.KeyValue(ctx, session.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	status, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info := status.(*jetstream.KeyValueBucketStatus).StreamInfo()
	if status.History() != 1 || status.TTL() != 7*24*time.Hour || info.Config.Storage != jetstream.FileStorage || info.Config.Name != "KV_SESSIONS" ||
		info.Config.MaxBytes != 64<<20 || !info.Config.AllowMsgTTL {
		t.Fatalf("bucket history %d, ttl %s, storage %s, stream %s, max bytes %d, message TTLs %v", status.History(), status.TTL(),
			info.Config.Storage, info.Config.Name, info.Config.MaxBytes, info.Config.AllowMsgTTL)
	}
	entries := bucketEntries(t, js)
	if len(entries) != 3 {
		t.Fatalf("%d entries (%v), want 2 sessions and an index", len(entries), entries)
	}
	for k, v := range entries {
		if (len(k) != 64 && !strings.HasPrefix(k, "u.")) || strings.Contains(k, id) || strings.Contains(v, id) || strings.Contains(v, other) ||
			strings.Contains(k, "alice") {
			t.Fatalf("bucket entry %s = %s shows a session id or a user name in a key", k, v)
		}
	}

	for _, bad := range []string{"", "x", strings.Repeat("A", 43), id + "A", strings.Repeat("*", 43)} {
		if _, err := st.Lookup(ctx, bad); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("lookup %q: %v", bad, err)
		}
	}

	// Another replica (its own connection) sees the session and its revocation.
	replica := open(t, natstest.JetStream(t, natstest.Connect(t, ns)), 7*24*time.Hour)
	if got, err := replica.Lookup(ctx, id); err != nil || got.User != "alice" {
		t.Fatalf("replica lookup %+v, %v", got, err)
	}
	if err := st.Revoke(ctx, id); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*session.Store{"revoking": st, "replica": replica} {
		if _, err := s.Lookup(ctx, id); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("%s: revoked session: %v", name, err)
		}
	}
	if _, err := replica.Lookup(ctx, other); err != nil {
		t.Fatalf("revoking one session ended another: %v", err)
	}

	// Expired.
	replica.SetClock(func() time.Time { return time.Now().Add(7*24*time.Hour + time.Minute) })
	if _, err := replica.Lookup(ctx, other); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("expired session: %v", err)
	}
}

// TestSessionsSurviveRestart: the bucket is on file: a session opened
// before the server restarts is there after it.
func TestSessionsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	ns := natstest.RunWithDir(t, dir)
	nc := natstest.Connect(t, ns)
	id, _, err := open(t, natstest.JetStream(t, nc), time.Hour).Create(ctx, "bob", "fp-bob")
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	ns.Shutdown()
	ns.WaitForShutdown()

	ns = natstest.RunWithDir(t, dir)
	st := open(t, natstest.JetStream(t, natstest.Connect(t, ns)), time.Hour)
	if got, err := st.Lookup(ctx, id); err != nil || got.User != "bob" {
		t.Fatalf("after restart: %+v, %v", got, err)
	}
}

// bucketEntries is every key the bucket holds a value for, with the value.
// The keys come from the stream's subjects: a key lister's watcher waits
// for markers that expire while it lists.
func bucketEntries(t *testing.T, js jetstream.JetStream) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, session.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "KV_"+session.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter("$KV."+session.Bucket+".>"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for subject := range info.State.Subjects {
		k := strings.TrimPrefix(subject, "$KV."+session.Bucket+".")
		if e, err := kv.Get(ctx, k); err == nil {
			out[k] = string(e.Value())
		}
	}
	return out
}
