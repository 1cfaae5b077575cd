package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// EndKey ends, on every replica, the sessions of user opened with the API
// key of keyFingerprint (the key was removed, or given to another user),
// found through the user's index, and returns how many it ended. Ending a
// session that already ended is no error: every replica that learns of
// the removal calls it.
func (s *Store) EndKey(ctx context.Context, user, keyFingerprint string) (int, error) {
	e, err := s.kv.Get(ctx, indexKey(user))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("session: end the sessions of a removed key: read the user's index: %w", err)
	}
	var idx []indexEntry
	if err := json.Unmarshal(e.Value(), &idx); err != nil {
		return 0, fmt.Errorf("session: end the sessions of a removed key: the user's index does not decode: %w", err)
	}
	var errs []error
	ended := map[string]bool{}
	for _, entry := range idx {
		rec, err := s.get(ctx, entry.Key)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if rec.KeyFingerprint != keyFingerprint {
			continue
		}
		if err := s.end(ctx, entry.Key); err != nil {
			errs = append(errs, err)
			continue
		}
		ended[entry.Key] = true
	}
	if len(ended) > 0 {
		if _, err := s.index(ctx, user, func(idx []indexEntry) []indexEntry {
			return slices.DeleteFunc(idx, func(e indexEntry) bool { return ended[e.Key] })
		}); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return len(ended), fmt.Errorf("session: end the sessions of a removed key: %w", err)
	}
	return len(ended), nil
}
