package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/alicia-voice/alicia/services/persistence/internal/consume"
)

// Partition leases (migration 00010). A stream's offset rows are its
// partitions; each is leased to one persistence instance at a time, and
// every take and release adds one to its fence. Apply, given a lease,
// locks the partition's row first and fails with consume.ErrLeaseLost
// unless the row is still the instance's under that fence, so an instance
// that lost a partition cannot commit a row of it.

// Lease is a partition held by an instance: where it is (Stream, Name), the
// fence it was taken under and its offset when it was taken or renewed.
type Lease struct {
	Stream, Name string
	Fence        int64
	Offset       uint64
}

// Unit names a partition.
type Unit struct{ Stream, Name string }

// leaseMarker starts the text the lease check fails with (cast to int, as
// the ownership guard does: plain SQL cannot raise an error).
const leaseMarker = "alicia-lease-lost: "

// lockLeaseSQL locks the partition's row for the rest of the transaction
// when the instance ($3) still holds it under the fence ($4); leaseCheckSQL
// then fails unless it does. Both run before any row of the batch is
// written: a transaction of an instance that lost the partition writes
// nothing, and a take waits until the batch being applied has committed.
const (
	lockLeaseSQL = `UPDATE alicia_stream_offsets SET updated_at = now()
		WHERE stream = $1 AND consumer = $2 AND owner = $3 AND fence = $4`
	leaseCheckSQL = `SELECT ('` + leaseMarker + `' || $2::text || ' is held by ' || coalesce(o.owner, 'no one') || ' under fence ' || o.fence)::int
		FROM alicia_stream_offsets o
		WHERE o.stream = $1 AND o.consumer = $2 AND (o.owner IS DISTINCT FROM $3::text OR o.fence <> $4::bigint)`
)

// leaseLost recognises the failed lease check.
func leaseLost(err error) (string, bool) { return markedFailure(err, leaseMarker) }

// Heartbeat records that instance id (applying consumer's partitions, of
// which there are partitions for conversations) is alive and forgets
// instances not seen for ten leases. It returns how many instances of
// consumer with the same partition count were seen within one lease (id
// included), and whether one with another count, started before id, is
// alive: id must then take nothing until it is gone.
func (s *Store) Heartbeat(ctx context.Context, id, consumer string, partitions int, ttl time.Duration) (live int, blocked bool, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO alicia_persistence_instances (id, consumer, partitions) VALUES ($1, $2, $3)
			ON CONFLICT (id) DO UPDATE SET seen_at = now(), consumer = EXCLUDED.consumer, partitions = EXCLUDED.partitions`,
			id, consumer, partitions); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM alicia_persistence_instances WHERE consumer = $1 AND seen_at < now() - $2::interval`,
			consumer, (10 * ttl).String()); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT count(*) FILTER (WHERE o.partitions = me.partitions),
				coalesce(bool_or(o.partitions <> me.partitions AND (o.started_at, o.id) < (me.started_at, me.id)), false)
			FROM alicia_persistence_instances o, alicia_persistence_instances me
			WHERE me.id = $3 AND o.consumer = $1 AND o.seen_at > now() - $2::interval`,
			consumer, ttl.String(), id).Scan(&live, &blocked)
	})
	if err != nil {
		return 0, false, fmt.Errorf("store: heartbeat: %w", err)
	}
	return live, blocked, nil
}

// EnsurePartitions creates the offset rows of a stream's partitions that
// have none yet, at the given offsets, bound to the stream ClaimOffsets
// claimed, and raises those that exist to them (offsets every instance's
// rows vouch for: applying from there skips nothing).
func (s *Store) EnsurePartitions(ctx context.Context, stream string, offsets map[string]uint64) error {
	c := s.claimed(stream)
	// In one order for every instance: instances starting together upsert
	// the same rows, and rows locked in a map's random order deadlock.
	names := slices.Sorted(maps.Keys(offsets))
	seqs := make([]int64, len(names))
	for i, name := range names {
		seqs[i] = int64(offsets[name])
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO alicia_stream_offsets (stream, consumer, last_seq, stream_created, epoch)
		SELECT $1, p.name, p.seq, $4, $5 FROM unnest($2::text[], $3::bigint[]) AS p(name, seq)
		ON CONFLICT (stream, consumer) DO UPDATE SET last_seq = EXCLUDED.last_seq
			WHERE alicia_stream_offsets.last_seq < EXCLUDED.last_seq`, stream, names, seqs, c.Stream.Created, c.Epoch)
	if err != nil {
		return fmt.Errorf("store: partitions of %s: %w", stream, err)
	}
	return nil
}

// Renew extends the leases instance id holds and returns those it still
// holds (same owner, same fence: no one took them, even if they had
// expired), with their offsets.
func (s *Store) Renew(ctx context.Context, id string, held []Lease, ttl time.Duration) ([]Lease, error) {
	if len(held) == 0 {
		return nil, nil
	}
	streams, names, fences := make([]string, len(held)), make([]string, len(held)), make([]int64, len(held))
	for i, l := range held {
		streams[i], names[i], fences[i] = l.Stream, l.Name, l.Fence
	}
	return s.leases(ctx, `UPDATE alicia_stream_offsets o SET lease_expires_at = now() + $5::interval
		FROM unnest($1::text[], $2::text[], $3::bigint[]) AS h(stream, name, fence)
		WHERE o.stream = h.stream AND o.consumer = h.name AND o.fence = h.fence AND o.owner = $4
		RETURNING o.stream, o.consumer, o.fence, o.last_seq`, streams, names, fences, id, ttl.String())
}

// Take leases to instance id up to n of the candidate partitions that no
// one holds: without an owner, past their lease, or owned under id by an
// earlier process of the same instance. Rows being written by a batch are
// skipped (taken on a later try).
func (s *Store) Take(ctx context.Context, id string, candidates []Unit, n int, ttl time.Duration) ([]Lease, error) {
	if n <= 0 || len(candidates) == 0 {
		return nil, nil
	}
	streams, names := make([]string, len(candidates)), make([]string, len(candidates))
	for i, u := range candidates {
		streams[i], names[i] = u.Stream, u.Name
	}
	return s.leases(ctx, `WITH free AS (
			SELECT o.stream, o.consumer FROM alicia_stream_offsets o
			JOIN unnest($1::text[], $2::text[]) AS c(stream, name) ON o.stream = c.stream AND o.consumer = c.name
			WHERE o.owner IS NULL OR o.owner = $3 OR o.lease_expires_at IS NULL OR o.lease_expires_at < now()
			ORDER BY o.stream, o.consumer LIMIT $4 FOR UPDATE OF o SKIP LOCKED)
		UPDATE alicia_stream_offsets o SET owner = $3, fence = o.fence + 1, lease_expires_at = now() + $5::interval
		FROM free WHERE o.stream = free.stream AND o.consumer = free.consumer
		RETURNING o.stream, o.consumer, o.fence, o.last_seq`, streams, names, id, n, ttl.String())
}

// Release gives up leases instance id holds (under their fences): their
// partitions can be taken at once.
func (s *Store) Release(ctx context.Context, id string, held []Lease) error {
	if len(held) == 0 {
		return nil
	}
	streams, names, fences := make([]string, len(held)), make([]string, len(held)), make([]int64, len(held))
	for i, l := range held {
		streams[i], names[i], fences[i] = l.Stream, l.Name, l.Fence
	}
	_, err := s.pool.Exec(ctx, `UPDATE alicia_stream_offsets o SET owner = NULL, fence = o.fence + 1, lease_expires_at = NULL
		FROM unnest($1::text[], $2::text[], $3::bigint[]) AS h(stream, name, fence)
		WHERE o.stream = h.stream AND o.consumer = h.name AND o.fence = h.fence AND o.owner = $4`, streams, names, fences, id)
	if err != nil {
		return fmt.Errorf("store: release: %w", err)
	}
	return nil
}

// Leave forgets instance id: it holds nothing any more (what it held can
// be taken at once) and no longer counts as alive.
func (s *Store) Leave(ctx context.Context, id string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE alicia_stream_offsets SET owner = NULL, fence = fence + 1, lease_expires_at = NULL WHERE owner = $1`, id); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM alicia_persistence_instances WHERE id = $1`, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: leave: %w", err)
	}
	return nil
}

// PartitionOffsets reads the stored offsets of consumer's partitions of a
// stream (what every instance has applied of them).
func (s *Store) PartitionOffsets(ctx context.Context, stream, consumer string) (map[string]uint64, error) {
	rows, err := s.pool.Query(ctx, `SELECT consumer, last_seq FROM alicia_stream_offsets
		WHERE stream = $1 AND (consumer = $2 OR starts_with(consumer, $2 || '/'))`, stream, consumer)
	if err != nil {
		return nil, fmt.Errorf("store: offsets of %s: %w", stream, err)
	}
	out := map[string]uint64{}
	var name string
	var seq int64
	_, err = pgx.ForEachRow(rows, []any{&name, &seq}, func() error {
		out[name] = uint64(seq)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: offsets of %s: %w", stream, err)
	}
	return out, nil
}

func (s *Store) leases(ctx context.Context, sql string, args ...any) ([]Lease, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("store: leases: %w", err)
	}
	var out []Lease
	var l Lease
	var seq int64
	_, err = pgx.ForEachRow(rows, []any{&l.Stream, &l.Name, &l.Fence, &seq}, func() error {
		l.Offset = uint64(seq)
		out = append(out, l)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: leases: %w", err)
	}
	return out, nil
}

// errLeaseLost is what Apply returns when the partition is no longer the
// instance's.
func errLeaseLost(what string) error { return fmt.Errorf("%w: %s", consume.ErrLeaseLost, what) }
