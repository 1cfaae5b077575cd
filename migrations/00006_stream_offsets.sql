-- Consumer offsets: the persistence service writes, in the same transaction
-- as the rows it derived from a JetStream message, the stream sequence of the
-- last message it applied. On restart it resumes after last_seq, and a
-- redelivered message with seq <= last_seq is recognised as already applied.

-- +goose Up
CREATE TABLE alicia_stream_offsets (
    stream      text NOT NULL,
    consumer    text NOT NULL,
    last_seq    bigint NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT alicia_stream_offsets_pkey PRIMARY KEY (stream, consumer),
    CONSTRAINT alicia_stream_offsets_last_seq_check CHECK (last_seq >= 0)
);

CREATE TRIGGER alicia_stream_offsets_set_updated_at BEFORE UPDATE ON alicia_stream_offsets
    FOR EACH ROW EXECUTE FUNCTION alicia_set_updated_at();

-- +goose Down
DROP TABLE IF EXISTS alicia_stream_offsets;
