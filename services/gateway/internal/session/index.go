package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/nats-io/nats.go/jetstream"
)

// A user's index is one entry of the bucket, indexKey(user): the bucket
// keys of the user's sessions, oldest first, each with its expiry. It is
// written only with a revision check (Create, or Update with the revision
// read), so sign-ins and sign-outs at once, on any replica, never lose
// each other's change: the one that lost reads again and retries. It is
// rewritten at every sign-in, so the bucket's TTL drops it only after
// every session it lists.

type indexEntry struct {
	Key       string `json:"k"`
	ExpiresAt int64  `json:"e"`
}

// indexKey is the bucket key of user's index; a session's key is 64 hex
// digits without a dot, so the two never meet.
func indexKey(user string) string {
	sum := sha256.Sum256([]byte("alicia session user\x00" + user))
	return "u." + hex.EncodeToString(sum[:])
}

// maxValueSize bounds an entry of the bucket: a session's record (under a
// kilobyte) or an index of perUser sessions (about 90 bytes each).
func maxValueSize(perUser int) int32 {
	return int32(max(1024, 256+perUser*96))
}

// indexAttempts bounds the retries of an index change that lost to others.
const indexAttempts = 100

// errBusy: an index change kept losing to others.
var errBusy = errors.New("the user's sessions are being changed by too many sign-ins at once")

// without is an index change that takes the session of bucket key k out.
func without(k string) func([]indexEntry) []indexEntry {
	return func(idx []indexEntry) []indexEntry {
		return slices.DeleteFunc(idx, func(e indexEntry) bool { return e.Key == k })
	}
}

// index applies change to user's index, with its expired sessions
// dropped, keeps the newest PerUser sessions and returns those it left
// out, oldest first: the caller ends them.
func (s *Store) index(ctx context.Context, user string, change func([]indexEntry) []indexEntry) ([]indexEntry, error) {
	ik := indexKey(user)
	for attempt := range indexAttempts {
		if attempt > 0 {
			// Others are changing it too: let the winner through.
			t := time.NewTimer(rand.N(time.Duration(attempt)*time.Millisecond + time.Millisecond))
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
		}
		var read []indexEntry
		var rev uint64
		e, err := s.kv.Get(ctx, ik)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
		case err != nil:
			return nil, fmt.Errorf("read the index of a user's sessions: %w", err)
		default:
			rev = e.Revision()
			if err := json.Unmarshal(e.Value(), &read); err != nil {
				// Only this package writes it; start it again rather than
				// keep the user from signing in until it expires.
				s.log.Warn().Err(err).Msg("the index of a user's sessions does not decode; starting it again")
				read = nil
			}
		}
		now := s.now().UnixMilli()
		idx := slices.DeleteFunc(slices.Clone(read), func(e indexEntry) bool { return e.ExpiresAt <= now })
		idx = change(idx)
		var out []indexEntry
		if n := len(idx) - s.perUser; n > 0 {
			out, idx = slices.Clone(idx[:n]), idx[n:]
		}
		if rev != 0 && slices.Equal(idx, read) {
			return nil, nil
		}
		v, err := json.Marshal(idx)
		if err != nil {
			return nil, err
		}
		switch err := bus.WriteRevision(ctx, s.kv, ik, v, rev); {
		case err == nil:
			return out, nil
		case !errors.Is(err, bus.ErrKVConflict):
			return nil, fmt.Errorf("write the index of a user's sessions: %w", err)
		}
	}
	return nil, errBusy
}
