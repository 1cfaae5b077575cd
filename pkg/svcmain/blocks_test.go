package svcmain_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/bus"
	cfgsrc "github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/svcmain"
)

// TestBusFrom: the NATS block reads its URL, user and password (or the
// password's file) and the streams' settings from a source (a bad one is
// refused naming it and its source), and an empty URL is refused naming its
// variable.
func TestBusFrom(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := svcmain.DefaultBus()
	if b.NATSURL != svcmain.DefaultNATSURL || b.Streams != bus.DefaultStreams() || b.Validate() != nil {
		t.Fatalf("defaults: %+v, %v", b, b.Validate())
	}
	src := cfgsrc.Source{}.Overlay("test", map[string]string{"ALICIA_NATS_URL": "nats://n:4222", "ALICIA_NATS_USER": "llm",
		"ALICIA_NATS_PASSWORD_FILE": pw, "ALICIA_STREAM_REPLICAS": "3", "ALICIA_STREAM_MAX_AGE": "720h"})
	if err := b.From(src); err != nil || b.NATSURL != "nats://n:4222" || b.NATSAuth.User != "llm" || b.NATSAuth.Password != "from-file" ||
		b.Streams.Replicas != 3 || b.Streams.MaxAge != 720*time.Hour || b.Streams.ConversationsMaxBytes != bus.DefaultConversationsMaxBytes {
		t.Fatalf("From = %+v, %v", b, err)
	}
	// A bad stream setting is the block's error, naming it and its source;
	// the rest is still read.
	b = svcmain.DefaultBus()
	err := b.From(cfgsrc.Source{}.Overlay("test", map[string]string{"ALICIA_NATS_USER": "gateway", "ALICIA_SYSTEM_MAX_BYTES": "1000"}))
	if err == nil || !strings.Contains(err.Error(), `ALICIA_SYSTEM_MAX_BYTES="1000" from test`) || b.NATSAuth.User != "gateway" {
		t.Fatalf("bad SYSTEM size: %+v, %v", b, err)
	}
	if err := (svcmain.Bus{}).Validate(); err == nil || !strings.Contains(err.Error(), "ALICIA_NATS_URL") {
		t.Fatalf("empty URL: %v", err)
	}
}

// TestMetricsFrom: each service names its metrics variable; an address
// that is not host:port is refused naming it, none is fine.
func TestMetricsFrom(t *testing.T) {
	var m svcmain.Metrics
	if err := m.Validate("ALICIA_X_METRICS_ADDR"); err != nil {
		t.Fatalf("none: %v", err)
	}
	m.From(cfgsrc.Source{}.Overlay("test", map[string]string{"ALICIA_X_METRICS_ADDR": "127.0.0.1:9100"}), "ALICIA_X_METRICS_ADDR")
	if m.MetricsAddr != "127.0.0.1:9100" || m.Validate("ALICIA_X_METRICS_ADDR") != nil {
		t.Fatalf("From = %+v", m)
	}
	m.MetricsAddr = "9100"
	if err := m.Validate("ALICIA_X_METRICS_ADDR"); err == nil || !strings.Contains(err.Error(), "ALICIA_X_METRICS_ADDR") {
		t.Fatalf("bad address: %v", err)
	}
}
