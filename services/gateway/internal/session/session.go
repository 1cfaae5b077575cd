// Package session keeps the web client's sessions: a browser trades an API
// key for a random session id (its cookie), and the gateway keeps the
// session in a JetStream KeyValue bucket, so every replica knows it and it
// outlives a restart. The bucket is keyed by the SHA-256 of the id, never
// the id itself: whoever reads the bucket cannot use what it holds.
//
// The bucket is bounded (64 MiB) and refuses new entries when full, so
// nothing may grow it without bound: a user holds at most PerUser
// sessions (index.go: signing in beyond ends the oldest), and an ended
// session leaves only a marker that lasts a second (a delete marker kept
// for the sessions' lifetime would fill the bucket as surely as sessions
// do). Watch reports how full it is.
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
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/natsauth"
)

// Bucket is the KeyValue bucket (stream KV_SESSIONS); the gateway's NATS
// user may use it, no other service may.
const Bucket = natsauth.SessionsBucket

// maxBytes bounds the bucket (a session is about 250 bytes: some 250,000
// sessions); JetStream reserves it on disk when the bucket is created.
const maxBytes = 64 << 20

// markerTTL is how long the marker an ended or expired session leaves
// stays in the bucket (JetStream's least; per-message TTLs need NATS 2.11).
const markerTTL = time.Second

// MaxPerUser is the most ALICIA_SESSIONS_PER_USER may be: a user's index
// is one entry of the bucket.
const MaxPerUser = 1000

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

// Config of a Store.
type Config struct {
	// TTL is how long a session lasts (ALICIA_SESSION_TTL).
	TTL time.Duration
	// PerUser is how many sessions a user may hold at once; signing in
	// beyond ends the oldest (ALICIA_SESSIONS_PER_USER, 1..MaxPerUser).
	PerUser int
	// Replicas is the bucket's replica count, the streams'
	// (ALICIA_STREAM_REPLICAS, svcmain.Bus.Streams; 0: 1).
	Replicas int
	// Log receives what goes wrong besides the answer (an evicted session
	// that could not be ended) and Watch's warnings.
	Log zerolog.Logger
	// maxBytes overrides the bucket's size (tests).
	maxBytes int64
}

// Store holds sessions in the bucket.
type Store struct {
	kv      jetstream.KeyValue
	ttl     time.Duration
	perUser int
	log     zerolog.Logger
	now     func() time.Time
}

// Open creates or updates the bucket (history 1, entries kept cfg.TTL,
// file storage, cfg.Replicas replicas like the streams,
// per-message TTLs for the markers) and returns its store.
func Open(ctx context.Context, js jetstream.JetStream, cfg Config) (*Store, error) {
	if cfg.PerUser < 1 || cfg.PerUser > MaxPerUser {
		return nil, fmt.Errorf("session: %d sessions per user: want 1..%d", cfg.PerUser, MaxPerUser)
	}
	replicas := max(cfg.Replicas, 1)
	size := cfg.maxBytes
	if size == 0 {
		size = maxBytes
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:         Bucket,
		Description:    "web client sessions of the gateway, by SHA-256 of the session id; each user's index of them",
		History:        1,
		TTL:            cfg.TTL,
		Storage:        jetstream.FileStorage,
		MaxBytes:       size,
		MaxValueSize:   maxValueSize(cfg.PerUser),
		Replicas:       replicas,
		LimitMarkerTTL: markerTTL,
	})
	if err != nil {
		return nil, fmt.Errorf("session: bucket %s: %w", Bucket, err)
	}
	return &Store{kv: kv, ttl: cfg.TTL, perUser: cfg.PerUser, log: cfg.Log, now: time.Now}, nil
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
// keyFingerprint, and returns its id (the cookie's value). When the user
// already holds PerUser sessions, the oldest end.
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
	k := key(id)
	// The index first: the user never holds more than PerUser sessions,
	// and a session is in its user's index while it lasts.
	evicted, err := s.index(ctx, user, func(idx []indexEntry) []indexEntry {
		return append(idx, indexEntry{Key: k, ExpiresAt: rec.ExpiresAt})
	})
	if err != nil {
		return "", Record{}, fmt.Errorf("session: create: %w", err)
	}
	for _, e := range evicted {
		if err := s.end(ctx, e.Key); err != nil {
			s.log.Warn().Err(err).Msg("end a session evicted by a newer one of its user; it lasts until it expires")
		}
	}
	if _, err := s.kv.Create(ctx, k, v); err != nil {
		if _, ierr := s.index(ctx, user, without(k)); ierr != nil {
			s.log.Warn().Err(ierr).Msg("take a session that could not be stored out of its user's index")
		}
		return "", Record{}, fmt.Errorf("session: create: %w", err)
	}
	return id, rec, nil
}

// Lookup returns the session of id; ErrNotFound when there is none: never
// opened, signed out, evicted or expired.
func (s *Store) Lookup(ctx context.Context, id string) (Record, error) {
	if !wellFormed(id) {
		return Record{}, ErrNotFound
	}
	rec, err := s.get(ctx, key(id))
	if errors.Is(err, ErrNotFound) {
		return Record{}, ErrNotFound
	}
	if err != nil {
		return Record{}, fmt.Errorf("session: lookup: %w", err)
	}
	// The bucket drops an entry ttl after it was written; a record read
	// just before that, or kept by a longer ttl earlier, ends here.
	if s.now().UnixMilli() >= rec.ExpiresAt {
		return Record{}, ErrNotFound
	}
	return rec, nil
}

// get reads the record of a bucket key (ErrNotFound when there is none).
func (s *Store) get(ctx context.Context, k string) (Record, error) {
	e, err := s.kv.Get(ctx, k)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return Record{}, ErrNotFound
	}
	if err != nil {
		return Record{}, err
	}
	var rec Record
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return Record{}, err
	}
	return rec, nil
}

// Revoke ends the session of id on every replica and takes it out of its
// user's index.
func (s *Store) Revoke(ctx context.Context, id string) error {
	if !wellFormed(id) {
		return nil
	}
	k := key(id)
	rec, err := s.get(ctx, k)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("session: revoke: %w", err)
	}
	if err := s.end(ctx, k); err != nil {
		return fmt.Errorf("session: revoke: %w", err)
	}
	if _, err := s.index(ctx, rec.User, without(k)); err != nil {
		return fmt.Errorf("session: revoke: %w", err)
	}
	return nil
}

// end removes a session's entry: a purge, whose marker lasts markerTTL.
func (s *Store) end(ctx context.Context, k string) error {
	return s.kv.Purge(ctx, k, jetstream.PurgeTTL(markerTTL))
}
