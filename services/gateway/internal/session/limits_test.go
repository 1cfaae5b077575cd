package session_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/natsauth"
	"github.com/alicia-voice/alicia/pkg/natsserver"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/services/gateway/internal/session"
)

// messages is how many messages the bucket's stream holds: sessions,
// indexes and the markers of ended sessions.
func messages(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	st, err := js.Stream(context.Background(), "KV_"+session.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// TestPerUserCap: a user holds at most PerUser sessions, the oldest
// ending first; other users are not touched, and what ended leaves
// nothing behind for long.
func TestPerUserCap(t *testing.T) {
	ns := natstest.Run(t)
	js := natstest.JetStream(t, natstest.Connect(t, ns))
	ctx := context.Background()
	st := openWith(t, js, session.Config{TTL: time.Hour, PerUser: 3})
	bob, _, err := st.Create(ctx, "bob", "fp-bob")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 5 {
		id, _, err := st.Create(ctx, "alice", "fp-alice")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for i, id := range ids {
		_, err := st.Lookup(ctx, id)
		if ended := i < 2; ended != errors.Is(err, session.ErrNotFound) || (!ended && err != nil) {
			t.Errorf("alice's session %d of 5: %v", i+1, err)
		}
	}
	if _, err := st.Lookup(ctx, bob); err != nil {
		t.Fatalf("bob's session: %v", err)
	}
	users := map[string]int{}
	for k, v := range bucketEntries(t, js) {
		if len(k) == 64 {
			var rec session.Record
			if err := json.Unmarshal([]byte(v), &rec); err != nil {
				t.Fatal(err)
			}
			users[rec.User]++
		}
	}
	if users["alice"] != 3 || users["bob"] != 1 {
		t.Fatalf("sessions by user %v", users)
	}
	// 4 sessions and 2 indexes once the markers of the 2 ended are gone.
	testkit.Eventually(t, 10*time.Second, func() bool { return messages(t, js) == 6 }, "the ended sessions' markers stay")

	// A smaller cap later: the next sign-in ends the sessions beyond it.
	small := openWith(t, js, session.Config{TTL: time.Hour, PerUser: 1})
	last, _, err := small.Create(ctx, "alice", "fp-alice")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range append(ids, last) {
		if _, err := small.Lookup(ctx, id); (id == last) != (err == nil) {
			t.Errorf("after the cap went down to 1, session %s…: %v", id[:4], err)
		}
	}
}

// TestCapUnderConcurrentSignIns: sign-ins at once on two replicas (each
// its own connection) never lose one another's index change: exactly
// PerUser sessions remain, and they are the ones the index lists.
func TestCapUnderConcurrentSignIns(t *testing.T) {
	ns := natstest.Run(t)
	ctx := context.Background()
	stores := []*session.Store{
		openWith(t, natstest.JetStream(t, natstest.Connect(t, ns)), session.Config{TTL: time.Hour, PerUser: 5}),
		openWith(t, natstest.JetStream(t, natstest.Connect(t, ns)), session.Config{TTL: time.Hour, PerUser: 5}),
	}
	var mu sync.Mutex
	var ids []string
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			id, _, err := stores[i%2].Create(ctx, "alice", "fp-alice")
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Error(err)
				return
			}
			ids = append(ids, id)
		})
	}
	wg.Wait()
	live := 0
	for _, id := range ids {
		if _, err := stores[0].Lookup(ctx, id); err == nil {
			live++
		}
	}
	if live != 5 {
		t.Fatalf("%d of %d sessions live, want 5", live, len(ids))
	}
}

// TestSignOutLeavesRoom: a session signed out leaves its user's index, so
// signing in and out again and again never pushes out the session the
// user keeps elsewhere.
func TestSignOutLeavesRoom(t *testing.T) {
	ns := natstest.Run(t)
	js := natstest.JetStream(t, natstest.Connect(t, ns))
	ctx := context.Background()
	st := openWith(t, js, session.Config{TTL: time.Hour, PerUser: 2})
	laptop, _, err := st.Create(ctx, "alice", "fp-alice")
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		phone, _, err := st.Create(ctx, "alice", "fp-alice")
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Revoke(ctx, phone); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Lookup(ctx, laptop); err != nil {
		t.Fatalf("the laptop's session: %v", err)
	}
	if err := st.Revoke(ctx, laptop); err != nil {
		t.Fatal(err)
	}
	if err := st.Revoke(ctx, laptop); err != nil { // twice: nothing to do
		t.Fatal(err)
	}
	// Only the (empty) index is left once the markers expire.
	testkit.Eventually(t, 10*time.Second, func() bool { return messages(t, js) == 1 }, "the signed out sessions' markers stay")
}

// TestOpenUpgradesTheBucket: a bucket made by an earlier gateway (no
// message TTLs, 1 KiB values) is updated in place, and its sessions keep
// working and can be signed out.
func TestOpenUpgradesTheBucket(t *testing.T) {
	ns := natstest.Run(t)
	js := natstest.JetStream(t, natstest.Connect(t, ns))
	ctx := context.Background()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: session.Bucket, History: 1, TTL: time.Hour,
		Storage: jetstream.FileStorage, MaxBytes: 64 << 20, MaxValueSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	old := strings.Repeat("A", 43)
	sum := sha256.Sum256([]byte(old))
	rec, _ := json.Marshal(session.Record{User: "alice", KeyFingerprint: "fp-alice", CreatedAt: time.Now().UnixMilli(),
		ExpiresAt: time.Now().Add(time.Hour).UnixMilli()})
	if _, err := kv.Create(ctx, hex.EncodeToString(sum[:]), rec); err != nil {
		t.Fatal(err)
	}
	st := open(t, js, time.Hour)
	if got, err := st.Lookup(ctx, old); err != nil || got.User != "alice" {
		t.Fatalf("the earlier session: %+v, %v", got, err)
	}
	if _, _, err := st.Create(ctx, "alice", "fp-alice"); err != nil {
		t.Fatal(err)
	}
	if err := st.Revoke(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Lookup(ctx, old); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("signed out: %v", err)
	}
}

// TestGatewayPermissions: the store needs nothing but what pkg/natsauth
// grants the gateway's NATS user.
func TestGatewayPermissions(t *testing.T) {
	var users []natsserver.User
	for _, u := range natsauth.Users() {
		users = append(users, natsserver.User{Name: u.Name, Password: "pw-" + u.Name, Permissions: u.Permissions})
	}
	srv, err := natsserver.Start(natsserver.Options{URL: "nats://" + testkit.FreeAddr(t), StoreDir: t.TempDir(), Users: users})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc := natstest.Connect(t, srv, bus.Credentials{User: natsauth.Gateway, Password: "pw-" + natsauth.Gateway}.Option())
	ctx := context.Background()
	st := openWith(t, natstest.JetStream(t, nc), session.Config{TTL: time.Hour, PerUser: 1})
	first, _, err := st.Create(ctx, "alice", "fp-alice")
	if err != nil {
		t.Fatal(err)
	}
	second, _, err := st.Create(ctx, "alice", "fp-alice") // ends the first
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Lookup(ctx, first); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("the evicted session: %v", err)
	}
	if _, err := st.Lookup(ctx, second); err != nil {
		t.Fatal(err)
	}
	if err := st.Revoke(ctx, second); err != nil {
		t.Fatal(err)
	}
	if used, most, err := st.Usage(ctx); err != nil || most != 64<<20 || used == 0 {
		t.Fatalf("usage %d of %d: %v", used, most, err)
	}
	// Reopening (a restart) updates the bucket as it is.
	openWith(t, natstest.JetStream(t, nc), session.Config{TTL: time.Hour, PerUser: 1})
}

// TestWatch: the gauges follow the bucket, and over 80 % the log warns,
// before sign-in fails.
func TestWatch(t *testing.T) {
	ns := natstest.Run(t)
	js := natstest.JetStream(t, natstest.Connect(t, ns))
	ctx := context.Background()
	var log testkit.SyncBuffer
	const size = 32 << 10
	st := openWith(t, js, session.WithMaxBytes(session.Config{TTL: time.Hour, PerUser: 1, Log: zerolog.New(&log)}, size))
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); st.Watch(wctx, 20*time.Millisecond) }()
	defer func() { cancel(); <-done }()
	testkit.Eventually(t, 5*time.Second, func() bool { return gauge(t, "alicia_gateway_sessions_max_bytes") == size }, "no max bytes gauge")

	for i := 0; ; i++ {
		used, _, err := st.Usage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if float64(used) > 0.85*size {
			break
		}
		if _, _, err := st.Create(ctx, fmt.Sprintf("user-%d", i), "fp"); err != nil {
			t.Fatalf("sign-in %d failed at %d of %d bytes, before the warning", i, used, size)
		}
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return strings.Contains(log.String(), "over 80% full") }, "no warning in %q", log.String())
	if g := gauge(t, "alicia_gateway_sessions_bytes"); g <= 0.8*size {
		t.Fatalf("bytes gauge %v", g)
	}
	if n := strings.Count(log.String(), "over 80% full"); n != 1 {
		t.Fatalf("warned %d times, want once an hour", n)
	}
}

func gauge(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}
