package bus

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrKVConflict is WriteRevision's answer when another writer changed the
// key since it was read: read it again and retry.
var ErrKVConflict = errors.New("bus: the key changed since it was read")

// WriteRevision writes v at key only if the key is still at rev, the
// revision it was read at (0: the key did not exist): a compare-and-set,
// for read-modify-write of a record several replicas share. It returns
// ErrKVConflict when another writer came first.
func WriteRevision(ctx context.Context, kv jetstream.KeyValue, key string, v []byte, rev uint64) error {
	var err error
	if rev == 0 {
		_, err = kv.Create(ctx, key, v)
	} else {
		_, err = kv.Update(ctx, key, v, rev)
	}
	var apiErr *jetstream.APIError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch),
		errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence:
		return ErrKVConflict
	}
	return err
}
