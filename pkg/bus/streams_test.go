package bus_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
)

// streamsFrom reads the streams' settings from a source holding
// name/value pairs, named "the test" in errors.
func streamsFrom(kv ...string) (bus.StreamsConfig, error) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return bus.StreamsFrom(config.Source{}.Overlay("the test", m))
}

// TestConversationsStreamLimit: the CONVERSATIONS stream is created (on
// the embedded server, whose storage limit is the disk's) with the default
// size limit, or the one from the setting every service reads; a
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
		{"from the setting", "67108864", 64 << 20, ""},
		{"no limit", "-1", -1, ""},
		{"too small", "1000", 0, "ALICIA_CONVERSATIONS_MAX_BYTES"},
		{"not a number", "4G", 0, "ALICIA_CONVERSATIONS_MAX_BYTES"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := streamsFrom(bus.EnvConversationsMaxBytes, c.env)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "the test") {
					t.Fatalf("err = %v, want one naming %s and the test", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			js := natstest.JetStream(t, natstest.Connect(t, natstest.Run(t)))
			if err := bus.EnsureStreams(ctx, js, s); err != nil {
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
// count (1 by default); a value outside 1..5 is an error reading the
// settings (the service's ConfigFrom, before it starts), naming the
// variable and the source that set it.
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
			s, err := streamsFrom(bus.EnvStreamReplicas, c.env)
			if n := s.Replicas; n != c.want || (err != nil) != c.err {
				t.Fatalf("StreamsFrom: Replicas %d, %v; want %d, error %v", n, err, c.want, c.err)
			}
			if err != nil && !strings.Contains(err.Error(), bus.EnvStreamReplicas) {
				t.Fatalf("err = %v, want one naming %s", err, bus.EnvStreamReplicas)
			}
			for _, cfg := range bus.StreamConfigs(s) {
				if cfg.Replicas != c.want {
					t.Fatalf("stream %s: Replicas %d, want %d", cfg.Name, cfg.Replicas, c.want)
				}
			}
			if got := bus.StreamConfigs(bus.StreamsConfig{Replicas: 2})[0].Replicas; got != 2 {
				t.Fatalf("an explicit Replicas 2 became %d", got)
			}
		})
	}
	t.Run("a bad value names the source that set it", func(t *testing.T) {
		under := config.Lookup("the compose file", func(string) (string, bool) { return "3", true })
		_, err := bus.StreamsFrom(under.Overlay("alicia up", map[string]string{bus.EnvStreamReplicas: "7"}))
		if err == nil || !strings.Contains(err.Error(), bus.EnvStreamReplicas+`="7" from alicia up`) {
			t.Fatalf("err = %v, want one naming %s, its value and alicia up", err, bus.EnvStreamReplicas)
		}
	})
}

// TestStreamRetention: ALICIA_STREAM_MAX_AGE gives CONVERSATIONS and
// SYSTEM their age limit (none by default, at least a day when set) and
// ALICIA_SYSTEM_MAX_BYTES the SYSTEM stream its size limit (none by
// default); the other streams keep their own ages. A stream made before
// gets the limits, and removing the variable lifts the age limit again.
// Beyond the size limit SYSTEM drops its oldest envelopes.
func TestStreamRetention(t *testing.T) {
	ctx := context.Background()
	info := func(t *testing.T, js jetstream.JetStream, name string) *jetstream.StreamInfo {
		t.Helper()
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		i, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	for _, c := range []struct {
		env  string
		want time.Duration
		err  bool
	}{
		{"", 0, false},
		{"0", 0, false},
		{"24h", 24 * time.Hour, false},
		{"2160h", 90 * 24 * time.Hour, false},
		{"23h59m", 0, true},
		{"1h", 0, true},
		{"-24h", 0, true},
		{"90d", 0, true},
		{"forever", 0, true},
	} {
		t.Run("age "+strconv.Quote(c.env), func(t *testing.T) {
			s, err := streamsFrom(bus.EnvStreamMaxAge, c.env)
			if d := s.MaxAge; d != c.want || (err != nil) != c.err {
				t.Fatalf("StreamsFrom: MaxAge %s, %v; want %s, error %v", d, err, c.want, c.err)
			}
			if err != nil && !strings.Contains(err.Error(), bus.EnvStreamMaxAge) {
				t.Fatalf("err = %v, want one naming %s", err, bus.EnvStreamMaxAge)
			}
		})
	}
	t.Run("the limits reach CONVERSATIONS and SYSTEM only", func(t *testing.T) {
		s, err := streamsFrom(bus.EnvStreamMaxAge, "720h", bus.EnvSystemMaxBytes, "67108864")
		if err != nil {
			t.Fatal(err)
		}
		js := natstest.JetStream(t, natstest.Connect(t, natstest.Run(t)))
		if err := bus.EnsureStreams(ctx, js, s); err != nil {
			t.Fatal(err)
		}
		want := map[string]time.Duration{
			bus.StreamConversations: 720 * time.Hour, bus.StreamSystem: 720 * time.Hour,
			bus.StreamDeadLetter: 30 * 24 * time.Hour, bus.StreamASRJobs: bus.ASRJobsMaxAge, bus.StreamDispatch: 0,
		}
		for name, age := range want {
			if got := info(t, js, name).Config.MaxAge; got != age {
				t.Errorf("%s: MaxAge %s, want %s", name, got, age)
			}
		}
		if got := info(t, js, bus.StreamSystem).Config.MaxBytes; got != 64<<20 {
			t.Errorf("SYSTEM: MaxBytes %d, want %d", got, 64<<20)
		}
		if got := info(t, js, bus.StreamConversations).Config.MaxBytes; got != bus.DefaultConversationsMaxBytes {
			t.Errorf("CONVERSATIONS: MaxBytes %d, want the default %d", got, bus.DefaultConversationsMaxBytes)
		}
	})
	t.Run("defaults: no age limit, SYSTEM unbounded", func(t *testing.T) {
		s, err := streamsFrom(bus.EnvStreamMaxAge, "", bus.EnvSystemMaxBytes, "")
		if err != nil {
			t.Fatal(err)
		}
		js := natstest.JetStream(t, natstest.Connect(t, natstest.Run(t)))
		if err := bus.EnsureStreams(ctx, js, s); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{bus.StreamConversations, bus.StreamSystem} {
			if got := info(t, js, name).Config.MaxAge; got != 0 {
				t.Errorf("%s: MaxAge %s, want none", name, got)
			}
		}
		if got := info(t, js, bus.StreamSystem).Config.MaxBytes; got != -1 {
			t.Errorf("SYSTEM: MaxBytes %d, want -1", got)
		}
	})
	t.Run("an existing stream gets the limit, and loses it when it is removed", func(t *testing.T) {
		js := natstest.JetStream(t, natstest.Connect(t, natstest.Run(t)))
		ensure := func(age string) {
			t.Helper()
			s, err := streamsFrom(bus.EnvStreamMaxAge, age)
			if err != nil {
				t.Fatal(err)
			}
			if err := bus.EnsureStreams(ctx, js, s); err != nil {
				t.Fatal(err)
			}
		}
		ensure("")
		ensure("48h")
		if got := info(t, js, bus.StreamConversations).Config.MaxAge; got != 48*time.Hour {
			t.Fatalf("MaxAge %s after setting %s=48h", got, bus.EnvStreamMaxAge)
		}
		ensure("")
		for _, name := range []string{bus.StreamConversations, bus.StreamSystem} {
			if got := info(t, js, name).Config.MaxAge; got != 0 {
				t.Errorf("%s: MaxAge %s after removing %s, want none", name, got, bus.EnvStreamMaxAge)
			}
		}
		// The other streams keep their own ages through it all.
		if got := info(t, js, bus.StreamDeadLetter).Config.MaxAge; got != 30*24*time.Hour {
			t.Errorf("DEADLETTER: MaxAge %s", got)
		}
	})
	for _, c := range []struct{ name, env, value string }{
		{"a bad age", bus.EnvStreamMaxAge, "1h"},
		{"a bad SYSTEM size", bus.EnvSystemMaxBytes, "1000"},
		{"a SYSTEM size that is no number", bus.EnvSystemMaxBytes, "1G"},
	} {
		t.Run(c.name+" fails the settings", func(t *testing.T) {
			s, err := streamsFrom(c.env, c.value)
			if err == nil || !strings.Contains(err.Error(), c.env) {
				t.Fatalf("err = %v, want one naming %s", err, c.env)
			}
			if s != bus.DefaultStreams() {
				t.Fatalf("a bad setting changed the streams' configuration: %+v", s)
			}
		})
	}
	t.Run("SYSTEM drops its oldest envelopes beyond its size", func(t *testing.T) {
		js := natstest.JetStream(t, natstest.Connect(t, natstest.Run(t)))
		if err := bus.EnsureStreams(ctx, js, bus.StreamsConfig{SystemMaxBytes: 1 << 20}); err != nil {
			t.Fatal(err)
		}
		chunk := make([]byte, 300<<10)
		for range 5 {
			if _, err := js.Publish(ctx, "alicia.sys.memory_action", chunk); err != nil {
				t.Fatal(err)
			}
		}
		st := info(t, js, bus.StreamSystem).State
		if st.Bytes > 1<<20 || st.FirstSeq == 1 || st.LastSeq != 5 {
			t.Fatalf("state %+v: want the oldest dropped to stay within 1 MiB", st)
		}
	})
}

// TestCreateStreams: a service that is not bus.StreamsOwner creates the
// streams that are missing, as EnsureStreams would, and leaves one that
// exists with another configuration alone (no update).
func TestCreateStreams(t *testing.T) {
	ctx := t.Context()
	js := natstest.JetStream(t, natstest.Connect(t, natstest.Run(t)))
	if err := bus.EnsureStreams(ctx, js, bus.StreamsConfig{ConversationsMaxBytes: 64 << 20}); err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(ctx, bus.StreamDeadLetter); err != nil {
		t.Fatal(err)
	}
	if err := bus.CreateStreams(ctx, js, bus.StreamsConfig{ConversationsMaxBytes: 32 << 20}); err != nil {
		t.Fatal(err)
	}
	info := func(t *testing.T, js jetstream.JetStream, name string) *jetstream.StreamInfo {
		t.Helper()
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo()
	}
	if got := info(t, js, bus.StreamConversations).Config.MaxBytes; got != 64<<20 {
		t.Errorf("CONVERSATIONS MaxBytes %d after CreateStreams: want the owner's %d kept", got, 64<<20)
	}
	if got := info(t, js, bus.StreamDeadLetter).Config.MaxAge; got != 30*24*time.Hour {
		t.Errorf("DEADLETTER made again with MaxAge %s, want 720h", got)
	}
}
