-- Voice turns: what the user actually heard of an answer, and the input audio
-- of an utterance assembled from its chunks. See README.md ("Playout").

-- +goose Up
-- playout_status (pending, played, interrupted, unplayed) and played_at exist
-- since 00002; a SentencePlayout also says how much of the sentence played,
-- and the row records the stream sequence of the playout that set it, so a
-- replay of the stream does not walk back through an older playout.
ALTER TABLE alicia_sentences
    ADD COLUMN played_ms integer,
    ADD COLUMN playout_seq bigint,
    ADD CONSTRAINT alicia_sentences_played_ms_check CHECK (played_ms IS NULL OR played_ms >= 0);

-- When a barge-in cut an answer's playout, contents holds only what the user
-- heard (the next turn's context) and generated_contents the whole answer the
-- model generated. NULL: the answer was not cut, contents is all of it.
ALTER TABLE alicia_messages
    ADD COLUMN generated_contents text;

-- The highest AudioChunk sequence appended to an utterance's input audio row,
-- so a redelivered chunk is not appended twice.
ALTER TABLE alicia_audio
    ADD COLUMN chunk_sequence integer;

-- +goose Down
ALTER TABLE alicia_audio DROP COLUMN IF EXISTS chunk_sequence;
ALTER TABLE alicia_messages DROP COLUMN IF EXISTS generated_contents;
ALTER TABLE alicia_sentences
    DROP CONSTRAINT IF EXISTS alicia_sentences_played_ms_check,
    DROP COLUMN IF EXISTS playout_seq,
    DROP COLUMN IF EXISTS played_ms;
