// Package backlog measures how much of CONVERSATIONS persistence has not
// applied yet, so that the edges refuse new client input before the
// stream's size limit (DiscardOld) could drop an envelope persistence has
// not stored: silent loss.
//
// Persistence (the one writer) reports at least once a second how far it
// has applied the stream — the highest sequence up to which every envelope
// is applied in every partition — to the KeyValue bucket BACKLOG,
// key "conversations" (Publish). An edge's Watcher reads that report and
// the stream's state about once a second, in the background, and estimates
// the bytes not applied yet as (LastSeq − applied) × (Bytes / Msgs). At or
// over Limit × MaxBytes, Refuse says so; Refuse is a lock-free read of the
// last estimate, never a request on the envelope path.
package backlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/config"
)

const (
	// Bucket is persistence's KeyValue bucket of reports (stream
	// KV_BACKLOG): persistence creates and writes it, the edges read
	// it (pkg/natsauth).
	Bucket = "BACKLOG"
	// KeyConversations is the key of CONVERSATIONS' report.
	KeyConversations = "conversations"
	// EnvLimit is the fraction of CONVERSATIONS' MaxBytes that envelopes
	// persistence has not applied may take before the edges refuse new
	// client input.
	EnvLimit = "ALICIA_STREAM_BACKLOG_LIMIT"
	// DefaultLimit is EnvLimit's default: half the stream. A flood must
	// then write the other half between two reads (a second) to drop an
	// unapplied envelope: 2 GiB/s at the default 4 GiB.
	DefaultLimit = 0.5
	// DefaultInterval is how often a Watcher reads the stream and the
	// report, and how often persistence writes it.
	DefaultInterval = time.Second
)

// Report is what persistence writes: how far it has applied a stream.
type Report struct {
	// Applied is the highest stream sequence up to which every envelope is
	// applied (the lowest offset of the stream's partitions).
	Applied uint64 `json:"applied"`
	// StreamCreated is when the stream Applied counts in was created: a new
	// stream of the same name (a new JetStream store) starts its sequences
	// at 1 again, and a report about the old one says nothing of it.
	StreamCreated time.Time `json:"stream_created"`
}

// BucketConfig is the bucket persistence creates: one entry per key, file
// storage, the streams' replica count (bus.StreamsConfig.Replicas,
// ALICIA_STREAM_REPLICAS).
func BucketConfig(replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:       Bucket,
		Description:  "How far persistence has applied CONVERSATIONS, for the edges' backlog limit",
		History:      1,
		MaxValueSize: 1 << 10,
		MaxBytes:     1 << 20,
		Storage:      jetstream.FileStorage,
		Replicas:     replicas,
	}
}

// EnsureBucket creates or updates the bucket with replicas replicas:
// persistence's part (its NATS user alone may).
func EnsureBucket(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.KeyValue, error) {
	cfg := BucketConfig(replicas)
	kv, err := js.CreateOrUpdateKeyValue(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("backlog: bucket %s: %w", Bucket, err)
	}
	return kv, nil
}

// Publish writes r as CONVERSATIONS' report.
func Publish(ctx context.Context, kv jetstream.KeyValue, r Report) error {
	b, err := json.Marshal(r)
	if err == nil {
		_, err = kv.Put(ctx, KeyConversations, b)
	}
	if err != nil {
		return fmt.Errorf("backlog: report: %w", err)
	}
	return nil
}

// Read returns CONVERSATIONS' report; ok is false when there is none yet.
func Read(ctx context.Context, kv jetstream.KeyValue) (r Report, ok bool, err error) {
	e, err := kv.Get(ctx, KeyConversations)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Report{}, false, nil
	}
	if err != nil {
		return Report{}, false, fmt.Errorf("backlog: read report: %w", err)
	}
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return Report{}, false, fmt.Errorf("backlog: report %q: %w", e.Value(), err)
	}
	return r, true, nil
}

// LimitFrom is the limit from ALICIA_STREAM_BACKLOG_LIMIT of src,
// DefaultLimit when unset; a value outside (0, 1] is an error (with
// DefaultLimit).
func LimitFrom(src config.Source) (float64, error) {
	v := src.Get(EnvLimit)
	if v == "" {
		return DefaultLimit, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !validLimit(f) {
		return DefaultLimit, fmt.Errorf("%s %q from %s: want a fraction of the stream's size above 0 and at most 1, e.g. 0.5", EnvLimit, v, src.Origin(EnvLimit))
	}
	return f, nil
}

func validLimit(f float64) bool { return f > 0 && f <= 1 }
