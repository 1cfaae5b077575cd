// Package bus holds Alicia's JetStream conventions: the streams, publishing
// protocol envelopes, the typed handler router with dead-lettering, server
// stanza ids and replaying a conversation.
package bus

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/subjects"
)

// Stream names.
const (
	StreamConversations = "CONVERSATIONS"
	StreamSystem        = "SYSTEM"
	StreamDeadLetter    = "DEADLETTER"
	// StreamASRJobs is the work queue of ASR jobs (ASRJob envelopes): one
	// shared durable consumer, every asr replica pulls from it.
	StreamASRJobs = "ASR_JOBS"
	// StreamDispatch is the work queue of room-agent dispatch requests
	// (AgentDispatch): at most one pending request per conversation; the
	// agent that holds one is in the room and keeps it in progress.
	StreamDispatch = "AGENT_DISPATCH"
)

// ASRJobsMaxAge drops jobs nobody took: a transcript that late is useless.
const ASRJobsMaxAge = 5 * time.Minute

// StreamsConfig tunes the streams EnsureStreams creates. Zero values take
// the defaults; StreamsFrom reads the settings every service shares.
type StreamsConfig struct {
	// MaxAge bounds how long the CONVERSATIONS and SYSTEM streams keep an
	// envelope (ALICIA_STREAM_MAX_AGE; zero: forever).
	MaxAge time.Duration
	// DeadLetterMaxAge bounds how long dead letters are kept (default 30 days).
	DeadLetterMaxAge time.Duration
	// Replicas is the stream replication factor in a cluster
	// (ALICIA_STREAM_REPLICAS, default 1), also the KV buckets'.
	Replicas int
	// Storage defaults to file storage.
	Storage jetstream.StorageType
	// DuplicateWindow is how long Nats-Msg-Id de-duplication remembers an id (default 2m).
	DuplicateWindow time.Duration
	// MaxMsgSize caps one stored envelope (default 2 MiB: the protocol's 1 MiB plus headroom).
	MaxMsgSize int32
	// ConversationsMaxBytes bounds the CONVERSATIONS stream; beyond, its
	// oldest envelopes are dropped (ALICIA_CONVERSATIONS_MAX_BYTES, default
	// DefaultConversationsMaxBytes; -1: no limit).
	ConversationsMaxBytes int64
	// SystemMaxBytes bounds the SYSTEM stream likewise
	// (ALICIA_SYSTEM_MAX_BYTES, default DefaultSystemMaxBytes; -1: no limit).
	SystemMaxBytes int64
}

// DefaultConversationsMaxBytes bounds the CONVERSATIONS stream: 4 GiB is
// months of a household's text and voice metadata, and small enough that
// JetStream, which reserves a stream's MaxBytes against its storage limit
// (by default 75% of the free disk) when the stream is created, fits it on
// a small board's SD card.
const DefaultConversationsMaxBytes int64 = 4 << 30

// EnvConversationsMaxBytes overrides DefaultConversationsMaxBytes in every
// service: each one ensures the streams with the same value.
const EnvConversationsMaxBytes = "ALICIA_CONVERSATIONS_MAX_BYTES"

// DefaultSystemMaxBytes leaves the SYSTEM stream unbounded: it holds tool
// and MCP settings and memory actions, a small fraction of CONVERSATIONS,
// and a default limit would reserve disk (see DefaultConversationsMaxBytes)
// that a small board does not have beside the 4 GiB of CONVERSATIONS.
const DefaultSystemMaxBytes int64 = -1

// EnvSystemMaxBytes overrides DefaultSystemMaxBytes in every service.
const EnvSystemMaxBytes = "ALICIA_SYSTEM_MAX_BYTES"

// EnvStreamMaxAge bounds how long the CONVERSATIONS and SYSTEM streams keep
// an envelope (Go duration syntax, e.g. 2160h for 90 days; unset or 0:
// forever). Every service reads it, so none sets the streams back to
// another age at its start.
const EnvStreamMaxAge = "ALICIA_STREAM_MAX_AGE"

// MinStreamMaxAge is the shortest ALICIA_STREAM_MAX_AGE: the services still
// need an envelope that long after it was published (a queued turn waits up
// to 24 h in LLM_TURNS and is answered from its conversation in
// CONVERSATIONS; persistence must apply every envelope before it expires,
// across an outage of a night; a client resumes after its last sequence).
const MinStreamMaxAge = 24 * time.Hour

// EnvStreamReplicas sets how many servers of a NATS cluster hold each
// Alicia stream and KV bucket (1..5, default 1). Every service reads it, so
// none of them sets a stream back to another replica count at its start.
const EnvStreamReplicas = "ALICIA_STREAM_REPLICAS"

// MaxStreamReplicas is the most replicas JetStream allows a stream.
const MaxStreamReplicas = 5

// DefaultStreams is the streams' configuration when none of their
// variables is set.
func DefaultStreams() StreamsConfig { return StreamsConfig{}.withDefaults() }

// StreamsFrom is DefaultStreams with what src sets (StreamsConfig.From).
func StreamsFrom(src config.Source) (StreamsConfig, error) {
	c := DefaultStreams()
	err := c.From(src)
	return c, err
}

// From overrides c's settings that src sets: ALICIA_STREAM_MAX_AGE (0, or
// at least MinStreamMaxAge), ALICIA_CONVERSATIONS_MAX_BYTES and
// ALICIA_SYSTEM_MAX_BYTES (bytes ≥ 1 MiB, or -1 for no limit),
// ALICIA_STREAM_REPLICAS (1..MaxStreamReplicas). A bad value leaves its
// field as it was and is an error naming the variable, its value and where
// it came from. Every service reads them (svcmain.Bus), so none sets the
// streams back to other values at its start.
func (c *StreamsConfig) From(src config.Source) error {
	var errs []error
	if v := src.Get(EnvStreamMaxAge); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || (d != 0 && d < MinStreamMaxAge) {
			errs = append(errs, badSetting(src, EnvStreamMaxAge, v, fmt.Sprintf("0 (forever) or a duration of at least %s, e.g. 2160h for 90 days", MinStreamMaxAge)))
		} else {
			c.MaxAge = d
		}
	}
	for _, m := range []struct {
		name string
		dst  *int64
	}{{EnvConversationsMaxBytes, &c.ConversationsMaxBytes}, {EnvSystemMaxBytes, &c.SystemMaxBytes}} {
		v := src.Get(m.name)
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || (n < 1<<20 && n != -1) {
			errs = append(errs, badSetting(src, m.name, v, "bytes ≥ 1048576, or -1 for no limit"))
			continue
		}
		*m.dst = n
	}
	if v := src.Get(EnvStreamReplicas); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxStreamReplicas {
			errs = append(errs, badSetting(src, EnvStreamReplicas, v, fmt.Sprintf("1 to %d", MaxStreamReplicas)))
		} else {
			c.Replicas = n
		}
	}
	return errors.Join(errs...)
}

// badSetting says what is wrong with name's value v from src.
func badSetting(src config.Source, name, v, want string) error {
	return fmt.Errorf("%s=%q from %s: want %s", name, v, src.Origin(name), want)
}

// withDefaults fills the fields c leaves zero with the hard defaults (a
// zero MaxAge stays: no age limit).
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
	if c.ConversationsMaxBytes == 0 {
		c.ConversationsMaxBytes = DefaultConversationsMaxBytes
	}
	if c.SystemMaxBytes == 0 {
		c.SystemMaxBytes = DefaultSystemMaxBytes
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
		maxBytes(base(StreamConversations, "Protocol envelopes of every conversation, client and server", subjects.AllConversations, c.MaxAge), c.ConversationsMaxBytes),
		maxBytes(base(StreamSystem, "Protocol envelopes not tied to one conversation", subjects.AllSystem, c.MaxAge), c.SystemMaxBytes),
		base(StreamDeadLetter, "Envelopes a consumer could not process, with the reason in headers", subjects.AllDeadLetters, c.DeadLetterMaxAge),
		asrJobs(base(StreamASRJobs, "ASR jobs (ASRJob envelopes), shared by every asr replica", subjects.AllASRJobs, ASRJobsMaxAge)),
		dispatch(base(StreamDispatch, "Room-agent dispatch requests (AgentDispatch), one pending per conversation", subjects.AllDispatch, 0)),
	}
}

func maxBytes(c jetstream.StreamConfig, n int64) jetstream.StreamConfig {
	c.MaxBytes = n
	return c
}

func asrJobs(c jetstream.StreamConfig) jetstream.StreamConfig {
	c.Retention = jetstream.WorkQueuePolicy
	return c
}

func dispatch(c jetstream.StreamConfig) jetstream.StreamConfig {
	c.Retention = jetstream.WorkQueuePolicy
	c.MaxMsgsPerSubject = 1
	c.Discard = jetstream.DiscardNew
	c.DiscardNewPerSubject = true
	return c
}

// StreamsOwner is the one service that may change the shared streams'
// configuration: its Connect creates or updates them (EnsureStreams). The
// others only create a stream still missing, with exactly the
// configuration they expect (CreateStreams), and never update, purge or
// delete one (pkg/natsauth grants them $JS.API.STREAM.CREATE and INFO
// only): a compromised service cannot shrink or empty CONVERSATIONS.
// Persistence, because it must apply every envelope before a limit drops
// it, and it starts before the gateway, the llm and memory.
const StreamsOwner = "persistence"

// EnsureStreams creates or updates every Alicia stream: the StreamsOwner's
// part (and a test's, or an operator's tool's, with every permission),
// with c (StreamsFrom reads it from the settings).
func EnsureStreams(ctx context.Context, js jetstream.JetStream, c StreamsConfig) error {
	for _, cfg := range StreamConfigs(c) {
		if err := EnsureStream(ctx, js, cfg); err != nil {
			return fmt.Errorf("bus: stream %s: %w", cfg.Name, err)
		}
	}
	return nil
}

// CreateStreams creates every Alicia stream that does not exist yet, with
// the configuration EnsureStreams would give it, and leaves a stream that
// exists alone, whatever its configuration: changing it is the
// StreamsOwner's (its EnsureStreams at its next start). This is what a
// service that is not the owner does at start; it needs
// $JS.API.STREAM.CREATE and INFO of each stream, never UPDATE. JetStream
// answers a create with a configuration identical to the stream's as a
// success and refuses one that differs, so two services creating a
// stream at once both succeed and a create cannot change a stream.
func CreateStreams(ctx context.Context, js jetstream.JetStream, c StreamsConfig) error {
	for _, cfg := range StreamConfigs(c) {
		if err := CreateStream(ctx, js, cfg); err != nil {
			return fmt.Errorf("bus: stream %s: %w", cfg.Name, err)
		}
	}
	return nil
}

// CreateStream creates the stream when it does not exist; one that exists,
// or is created concurrently with another configuration, is left as it is.
func CreateStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) error {
	_, err := js.Stream(ctx, cfg.Name)
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return err
	}
	_, err = js.CreateStream(ctx, cfg)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return nil
	}
	return err
}

// EnsureStream creates the stream, or updates it when cfg changes what the
// server has; a stream that already fits is left alone. Services starting
// together all ensure the same streams, and nats-server (v2.15) races a
// stream update against a concurrent create of another stream, so a
// needless update is not harmless. cfg's MaxAge is applied as it is, zero
// included (no age limit): an age limit once set is lifted again when the
// setting is removed.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) error {
	for range 3 {
		s, err := js.Stream(ctx, cfg.Name)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			_, err = js.CreateStream(ctx, cfg)
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				continue // created concurrently: check it again
			}
			return err
		case err != nil:
			return err
		}
		have := s.CachedInfo().Config
		if cfg.MaxAge == 0 && have.MaxAge != 0 {
			// mergeStreamConfig skips zero fields: lift the limit here.
			have.MaxAge = 0
			if _, err := js.UpdateStream(ctx, have); err != nil {
				return err
			}
		}
		return UpdateStreamIfChanged(ctx, js, have, cfg)
	}
	return fmt.Errorf("bus: stream %s created and deleted concurrently", cfg.Name)
}

// UpdateStreamIfChanged updates a stream whose configuration is have with
// every field want sets (non-zero), unless that changes nothing.
func UpdateStreamIfChanged(ctx context.Context, js jetstream.JetStream, have, want jetstream.StreamConfig) error {
	merged, changed, err := mergeStreamConfig(have, want)
	if err != nil || !changed {
		return err
	}
	_, err = js.UpdateStream(ctx, merged)
	return err
}

// mergeStreamConfig sets over have every field want sets (non-zero) and
// reports whether that changed anything.
func mergeStreamConfig(have, want jetstream.StreamConfig) (jetstream.StreamConfig, bool, error) {
	merged := have
	m, w := reflect.ValueOf(&merged).Elem(), reflect.ValueOf(want)
	changed := false
	for i := range w.NumField() {
		f := w.Field(i)
		if f.IsZero() || reflect.DeepEqual(f.Interface(), m.Field(i).Interface()) {
			continue
		}
		m.Field(i).Set(f)
		changed = true
	}
	return merged, changed, nil
}
