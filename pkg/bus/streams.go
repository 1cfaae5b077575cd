// Package bus holds Alicia's JetStream conventions: the streams, publishing
// protocol envelopes, the typed handler router with dead-lettering, server
// stanza ids and replaying a conversation.
package bus

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/subjects"
)

// Stream names.
const (
	StreamConversations = "CONVERSATIONS"
	StreamSystem        = "SYSTEM"
	StreamDeadLetter    = "DEADLETTER"
)

// StreamsConfig tunes the streams EnsureStreams creates. Zero values take the defaults.
type StreamsConfig struct {
	// MaxAge bounds how long conversation envelopes are kept (default: forever).
	MaxAge time.Duration
	// DeadLetterMaxAge bounds how long dead letters are kept (default 30 days).
	DeadLetterMaxAge time.Duration
	// Replicas is the stream replication factor in a cluster (default 1).
	Replicas int
	// Storage defaults to file storage.
	Storage jetstream.StorageType
	// DuplicateWindow is how long Nats-Msg-Id de-duplication remembers an id (default 2m).
	DuplicateWindow time.Duration
	// MaxMsgSize caps one stored envelope (default 2 MiB: the protocol's 1 MiB plus headroom).
	MaxMsgSize int32
}

func (c StreamsConfig) withDefaults() StreamsConfig {
	if c.DeadLetterMaxAge == 0 {
		c.DeadLetterMaxAge = 30 * 24 * time.Hour
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = 2 * time.Minute
	}
	if c.MaxMsgSize == 0 {
		c.MaxMsgSize = 2 << 20
	}
	return c
}

// StreamConfigs returns the configuration of every Alicia stream.
func StreamConfigs(c StreamsConfig) []jetstream.StreamConfig {
	c = c.withDefaults()
	base := func(name, desc, subject string, maxAge time.Duration) jetstream.StreamConfig {
		return jetstream.StreamConfig{
			Name:        name,
			Description: desc,
			Subjects:    []string{subject},
			Retention:   jetstream.LimitsPolicy,
			Storage:     c.Storage,
			Replicas:    c.Replicas,
			MaxAge:      maxAge,
			Discard:     jetstream.DiscardOld,
			Duplicates:  c.DuplicateWindow,
			MaxMsgSize:  c.MaxMsgSize,
			AllowDirect: true,
		}
	}
	return []jetstream.StreamConfig{
		base(StreamConversations, "Protocol envelopes of every conversation, client and server", subjects.AllConversations, c.MaxAge),
		base(StreamSystem, "Protocol envelopes not tied to one conversation", subjects.AllSystem, c.MaxAge),
		base(StreamDeadLetter, "Envelopes a consumer could not process, with the reason in headers", subjects.AllDeadLetters, c.DeadLetterMaxAge),
	}
}

// EnsureStreams creates or updates every Alicia stream.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, c StreamsConfig) error {
	for _, cfg := range StreamConfigs(c) {
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("bus: stream %s: %w", cfg.Name, err)
		}
	}
	return nil
}
