-- Which stream an offset belongs to. A JetStream stream that is created anew
-- (a new store, a new NATS cluster) numbers its messages from 1 again, so an
-- offset is only meaningful together with the identity of the stream it was
-- read from: stream_created is that stream's creation time as JetStream
-- reports it (empty on rows written before this column existed).
--
-- epoch counts the streams of that name this database has consumed: 0 for
-- the first, one more each time persistence finds a different stream. Rows
-- that order changes by stream sequence (alicia.applied_seq.* meta values,
-- playout_seq, meta ids) use epoch << 44 | sequence, so everything a new
-- stream brings sorts after what the old one brought.

-- +goose Up
ALTER TABLE alicia_stream_offsets
    ADD COLUMN stream_created text NOT NULL DEFAULT '',
    ADD COLUMN epoch integer NOT NULL DEFAULT 0,
    ADD CONSTRAINT alicia_stream_offsets_epoch_check CHECK (epoch >= 0);

-- +goose Down
ALTER TABLE alicia_stream_offsets
    DROP COLUMN epoch,
    DROP COLUMN stream_created;
