package bus_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
)

// TestConversationsStreamLimit: the CONVERSATIONS stream is created (on
// the embedded server, whose storage limit is the disk's) with the default
// size limit, or the one from the environment every service reads; a
// stream made before the limit existed gets it; beyond it the oldest
// envelopes are dropped.
func TestConversationsStreamLimit(t *testing.T) {
	ctx := context.Background()
	maxBytes := func(t *testing.T, js jetstream.JetStream) int64 {
		t.Helper()
		st, err := js.Stream(ctx, bus.StreamConversations)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.Config.MaxBytes
	}
	for _, c := range []struct {
		name, env string
		want      int64
		err       string
	}{
		{"default", "", bus.DefaultConversationsMaxBytes, ""},
		{"from the environment", "67108864", 64 << 20, ""},
		{"no limit", "-1", -1, ""},
		{"too small", "1000", 0, "ALICIA_CONVERSATIONS_MAX_BYTES"},
		{"not a number", "4G", 0, "ALICIA_CONVERSATIONS_MAX_BYTES"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(bus.EnvConversationsMaxBytes, c.env)
			js := natstest.JetStream(t, natstest.Connect(t, natstest.Run(t)))
			err := bus.EnsureStreams(ctx, js, bus.StreamsConfig{})
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want one naming %s", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := maxBytes(t, js); got != c.want {
				t.Fatalf("MaxBytes = %d, want %d", got, c.want)
			}
		})
	}
	t.Run("an existing unlimited stream gets the limit", func(t *testing.T) {
		js := natstest.JetStream(t, natstest.Connect(t, natstest.Run(t)))
		if err := bus.EnsureStreams(ctx, js, bus.StreamsConfig{ConversationsMaxBytes: -1}); err != nil {
			t.Fatal(err)
		}
		if err := bus.EnsureStreams(ctx, js, bus.StreamsConfig{}); err != nil {
			t.Fatal(err)
		}
		if got := maxBytes(t, js); got != bus.DefaultConversationsMaxBytes {
			t.Fatalf("MaxBytes = %d, want %d", got, bus.DefaultConversationsMaxBytes)
		}
	})
	t.Run("the oldest envelopes are dropped beyond the limit", func(t *testing.T) {
		js := natstest.JetStream(t, natstest.Connect(t, natstest.Run(t)))
		if err := bus.EnsureStreams(ctx, js, bus.StreamsConfig{ConversationsMaxBytes: 1 << 20}); err != nil {
			t.Fatal(err)
		}
		chunk := make([]byte, 300<<10)
		for range 5 {
			if _, err := js.Publish(ctx, "alicia.conv.ac_big.client.audio_chunk", chunk); err != nil {
				t.Fatal(err)
			}
		}
		st, _ := js.Stream(ctx, bus.StreamConversations)
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Bytes > 1<<20 || info.State.FirstSeq == 1 || info.State.LastSeq != 5 {
			t.Fatalf("state %+v: want the oldest dropped to stay within 1 MiB", info.State)
		}
	})
}

// TestStreamReplicas: ALICIA_STREAM_REPLICAS gives every stream its replica
// count (1 by default); a value outside 1..5 is an error EnsureStreams
// reports when the service starts.
func TestStreamReplicas(t *testing.T) {
	for _, c := range []struct {
		env  string
		want int
		err  bool
	}{
		{"", 1, false},
		{"1", 1, false},
		{"3", 3, false},
		{"5", 5, false},
		{"0", 1, true},
		{"6", 1, true},
		{"-1", 1, true},
		{"three", 1, true},
		{" 3", 1, true},
	} {
		t.Run("env "+strconv.Quote(c.env), func(t *testing.T) {
			t.Setenv(bus.EnvStreamReplicas, c.env)
			n, err := bus.StreamReplicas()
			if n != c.want || (err != nil) != c.err {
				t.Fatalf("StreamReplicas() = %d, %v; want %d, error %v", n, err, c.want, c.err)
			}
			if err != nil && !strings.Contains(err.Error(), bus.EnvStreamReplicas) {
				t.Fatalf("err = %v, want one naming %s", err, bus.EnvStreamReplicas)
			}
			for _, cfg := range bus.StreamConfigs(bus.StreamsConfig{}) {
				if cfg.Replicas != c.want {
					t.Fatalf("stream %s: Replicas %d, want %d", cfg.Name, cfg.Replicas, c.want)
				}
			}
			if got := bus.StreamConfigs(bus.StreamsConfig{Replicas: 2})[0].Replicas; got != 2 {
				t.Fatalf("an explicit Replicas 2 became %d", got)
			}
		})
	}
	t.Run("a bad value fails EnsureStreams", func(t *testing.T) {
		t.Setenv(bus.EnvStreamReplicas, "7")
		js := natstest.JetStream(t, natstest.Connect(t, natstest.Run(t)))
		err := bus.EnsureStreams(context.Background(), js, bus.StreamsConfig{})
		if err == nil || !strings.Contains(err.Error(), bus.EnvStreamReplicas) {
			t.Fatalf("err = %v, want one naming %s", err, bus.EnvStreamReplicas)
		}
	})
}
