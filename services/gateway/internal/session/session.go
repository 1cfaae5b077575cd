// Package session keeps the web client's sessions: a browser trades an API
// key for a random session id (its cookie), and the gateway keeps the
// session in a JetStream KeyValue bucket, so every replica knows it and it
// outlives a restart. The bucket is keyed by the SHA-256 of the id, never
// the id itself: whoever reads the bucket cannot use what it holds.
package session

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/natsauth"
)

// Bucket is the KeyValue bucket (stream KV_SESSIONS); the gateway's NATS
// user may use it, no other service may.
const Bucket = natsauth.SessionsBucket

// maxBytes bounds the bucket (a session is about 200 bytes: some 300,000
// sessions); JetStream reserves it on disk when the bucket is created.
const maxBytes = 64 << 20

// idBytes is the entropy of a session id.
const idBytes = 32

// Record is what the bucket holds for one session.
type Record struct {
	// User the session acts for.
	User string `json:"user"`
	// KeyFingerprint names the API key it was opened with (auth.Fingerprint):
	// once that key is no longer configured, the session is void.
	KeyFingerprint string `json:"key"`
	// CreatedAt and ExpiresAt in milliseconds since the epoch.
	CreatedAt int64 `json:"createdAt"`
	ExpiresAt int64 `json:"expiresAt"`
}

// Store holds sessions in the bucket.
type Store struct {
	kv  jetstream.KeyValue
	ttl time.Duration
	now func() time.Time
}

// Open creates or updates the bucket (history 1, entries kept ttl, file
// storage, ALICIA_STREAM_REPLICAS replicas like the streams) and returns
// its store; a session lasts ttl.
func Open(ctx context.Context, js jetstream.JetStream, ttl time.Duration) (*Store, error) {
	replicas, err := bus.StreamReplicas()
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:       Bucket,
		Description:  "web client sessions of the gateway, by SHA-256 of the session id",
		History:      1,
		TTL:          ttl,
		Storage:      jetstream.FileStorage,
		MaxBytes:     maxBytes,
		MaxValueSize: 1024,
		Replicas:     replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("session: bucket %s: %w", Bucket, err)
	}
	return &Store{kv: kv, ttl: ttl, now: time.Now}, nil
}

// TTL is how long a session lasts.
func (s *Store) TTL() time.Duration { return s.ttl }

// key is the bucket key of a session id.
func key(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// wellFormed reports whether id can be one Create made, so garbage is
// refused without asking the bucket.
func wellFormed(id string) bool {
	if len(id) != base64.RawURLEncoding.EncodedLen(idBytes) {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(id)
	return err == nil
}

// Create opens a session for user, opened with the API key of
// keyFingerprint, and returns its id (the cookie's value).
func (s *Store) Create(ctx context.Context, user, keyFingerprint string) (string, Record, error) {
	b := make([]byte, idBytes)
	if _, err := rand.Read(b); err != nil {
		return "", Record{}, fmt.Errorf("session: %w", err)
	}
	id := base64.RawURLEncoding.EncodeToString(b)
	now := s.now()
	rec := Record{User: user, KeyFingerprint: keyFingerprint, CreatedAt: now.UnixMilli(), ExpiresAt: now.Add(s.ttl).UnixMilli()}
	v, err := json.Marshal(rec)
	if err != nil {
		return "", Record{}, fmt.Errorf("session: %w", err)
	}
	if _, err := s.kv.Create(ctx, key(id), v); err != nil {
		return "", Record{}, fmt.Errorf("session: create: %w", err)
	}
	return id, rec, nil
}

// Lookup returns the session of id; ErrNotFound when there is none: never
// opened, signed out or expired.
func (s *Store) Lookup(ctx context.Context, id string) (Record, error) {
	if !wellFormed(id) {
		return Record{}, ErrNotFound
	}
	e, err := s.kv.Get(ctx, key(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return Record{}, ErrNotFound
	}
	if err != nil {
		return Record{}, fmt.Errorf("session: lookup: %w", err)
	}
	var rec Record
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return Record{}, fmt.Errorf("session: lookup: %w", err)
	}
	// The bucket drops an entry ttl after it was written; a record read
	// just before that, or kept by a longer ttl earlier, ends here.
	if s.now().UnixMilli() >= rec.ExpiresAt {
		return Record{}, ErrNotFound
	}
	return rec, nil
}

// Revoke ends the session of id on every replica.
func (s *Store) Revoke(ctx context.Context, id string) error {
	if !wellFormed(id) {
		return nil
	}
	if err := s.kv.Delete(ctx, key(id)); err != nil {
		return fmt.Errorf("session: revoke: %w", err)
	}
	return nil
}
