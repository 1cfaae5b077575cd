package natsauth_test

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/backlog"
	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/natsauth"
)

// TestOnlyTheOwnerChangesSharedStreams: every service still joins the bus
// (bus.Connect creates what is missing), but only bus.StreamsOwner may
// update a shared stream; no service may purge or delete one (the
// operator's admin may); a create with another configuration than the
// stream's (a service trying to shrink CONVERSATIONS) is refused by the
// server and changes nothing, while one with the same configuration (two
// services starting at once) succeeds.
func TestOnlyTheOwnerChangesSharedStreams(t *testing.T) {
	url := startServer(t)
	ctx := context.Background()
	// The services in their table order: the gateway, not the owner,
	// creates the streams, and the owner then finds them as it wants them.
	js := map[string]jetstream.JetStream{}
	v := map[string]violations{}
	for _, user := range natsauth.Services() {
		v[user] = violations{make(chan error, 1)}
		_, js[user] = connect(t, url, user, v[user])
	}
	want := bus.StreamConfigs(bus.StreamsConfig{})[0]
	if want.Name != bus.StreamConversations {
		t.Fatalf("first stream is %s", want.Name)
	}
	shrunk := want
	shrunk.MaxBytes = 1 << 20
	maxBytes := func() int64 {
		t.Helper()
		s, err := js[natsauth.Gateway].Stream(ctx, bus.StreamConversations)
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().Config.MaxBytes
	}
	for _, user := range natsauth.Services() {
		t.Run(user, func(t *testing.T) {
			j := js[user]
			if _, err := j.CreateStream(ctx, want); err != nil {
				t.Errorf("create with the stream's own configuration: %v", err)
			}
			if _, err := j.CreateStream(ctx, shrunk); !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				t.Errorf("create with a smaller MaxBytes: %v, want the server's refusal (stream name already in use)", err)
			}
			for what, op := range map[string]func(context.Context) error{
				"purge": func(ctx context.Context) error {
					s, err := j.Stream(ctx, bus.StreamConversations)
					if err == nil {
						err = s.Purge(ctx)
					}
					return err
				},
				"delete": func(ctx context.Context) error { return j.DeleteStream(ctx, bus.StreamConversations) },
			} {
				if !denied(t, v[user], op) {
					t.Errorf("could %s CONVERSATIONS", what)
				}
			}
			update := func(ctx context.Context) error { _, err := j.UpdateStream(ctx, shrunk); return err }
			if user != bus.StreamsOwner {
				if !denied(t, v[user], update) {
					t.Error("could update CONVERSATIONS")
				}
				if got := maxBytes(); got != want.MaxBytes {
					t.Fatalf("CONVERSATIONS MaxBytes %d after %s tried, want %d", got, user, want.MaxBytes)
				}
			}
		})
	}
	// The owner may, and its EnsureStreams sets the configuration back.
	if _, err := js[bus.StreamsOwner].UpdateStream(ctx, shrunk); err != nil {
		t.Fatalf("%s: update: %v", bus.StreamsOwner, err)
	}
	if got := maxBytes(); got != shrunk.MaxBytes {
		t.Fatalf("MaxBytes %d after the owner's update, want %d", got, shrunk.MaxBytes)
	}
	if err := bus.EnsureStreams(ctx, js[bus.StreamsOwner], bus.StreamsConfig{}); err != nil {
		t.Fatalf("%s: EnsureStreams: %v", bus.StreamsOwner, err)
	}
	if got := maxBytes(); got != want.MaxBytes {
		t.Fatalf("MaxBytes %d after the owner's EnsureStreams, want %d", got, want.MaxBytes)
	}
	// A service that is not the owner, started with another setting,
	// neither fails nor changes the stream.
	if err := bus.CreateStreams(ctx, js[natsauth.Gateway], bus.StreamsConfig{ConversationsMaxBytes: 1 << 20}); err != nil {
		t.Fatalf("gateway: CreateStreams with another size: %v", err)
	}
	if got := maxBytes(); got != want.MaxBytes {
		t.Fatalf("MaxBytes %d after the gateway's CreateStreams, want %d", got, want.MaxBytes)
	}
	// Purging is the operator's.
	_, ajs := connect(t, url, natsauth.Admin, violations{make(chan error, 1)})
	s, err := ajs.Stream(ctx, bus.StreamConversations)
	if err == nil {
		err = s.Purge(ctx)
	}
	if err != nil {
		t.Fatalf("admin: purge: %v", err)
	}
}

// TestBacklogBucket: persistence creates the backlog bucket and writes
// CONVERSATIONS' report; the edges (gateway, room-agent) read it and the
// stream's state (backlog.Watch); no one else may open it, and the edges
// may not write it.
func TestBacklogBucket(t *testing.T) {
	url := startServer(t)
	ctx := context.Background()
	_, pjs := connect(t, url, natsauth.Persistence, violations{make(chan error, 1)})
	kv, err := backlog.EnsureBucket(ctx, pjs, 1)
	if err != nil {
		t.Fatal(err)
	}
	s, err := pjs.Stream(ctx, bus.StreamConversations)
	if err != nil {
		t.Fatal(err)
	}
	if err := backlog.Publish(ctx, kv, backlog.Report{Applied: 7, StreamCreated: s.CachedInfo().Created}); err != nil {
		t.Fatal(err)
	}
	edges := map[string]bool{natsauth.Gateway: true, natsauth.RoomAgent: true}
	for _, user := range natsauth.Services() {
		if user == natsauth.Persistence {
			continue
		}
		t.Run(user, func(t *testing.T) {
			v := violations{make(chan error, 1)}
			_, js := connect(t, url, user, v)
			open := func(ctx context.Context) error { _, err := js.KeyValue(ctx, backlog.Bucket); return err }
			if !edges[user] {
				if !denied(t, v, open) {
					t.Error("could open the backlog bucket")
				}
				return
			}
			w, err := backlog.Watch(ctx, js, backlog.Config{})
			if err != nil {
				t.Fatalf("watch: %v", err)
			}
			w.Stop()
			if st := w.State(); !st.Reported || st.Applied != 7 {
				t.Errorf("watcher read %+v, want persistence's report (applied 7)", st)
			}
			ekv, err := js.KeyValue(ctx, backlog.Bucket)
			if err != nil {
				t.Fatal(err)
			}
			put := func(ctx context.Context) error {
				_, err := ekv.Put(ctx, backlog.KeyConversations, []byte(`{"applied":99}`))
				return err
			}
			if !denied(t, v, put) {
				t.Error("could write the report")
			}
			update := func(ctx context.Context) error {
				cfg := backlog.BucketConfig(1)
				_, err := js.CreateOrUpdateKeyValue(ctx, cfg)
				return err
			}
			if !denied(t, v, update) {
				t.Error("could create or update the bucket")
			}
		})
	}
}
