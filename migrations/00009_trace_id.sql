-- The trace of the envelope that made a row. Every envelope carries the
-- OpenTelemetry trace context of the span that published it in its meta
-- (messaging.trace_id, messaging.span_id); persistence stored both as
-- alicia_meta rows, two rows per envelope next to its one or none. Trace
-- context is not user metadata: the trace id is now a column of the rows
-- an envelope makes (messages, sentences, tool uses, reasoning steps, memory
-- traces), and neither key is stored in alicia_meta any more. The span id is
-- not kept: the trace leads to the spans.
--
-- trace_id is the 32 lowercase hex digits the trace id is written as in
-- meta, logs and trace viewers; NULL when the envelope had none (or an
-- invalid or all-zero one). The partial indexes lead from a trace to its
-- rows; the row's own trace_id leads to the trace. See README.md ("Trace").

-- +goose Up
ALTER TABLE alicia_messages ADD COLUMN trace_id text,
    ADD CONSTRAINT alicia_messages_trace_id_check CHECK (trace_id ~ '^[0-9a-f]{32}$' AND trace_id <> repeat('0', 32));
ALTER TABLE alicia_sentences ADD COLUMN trace_id text,
    ADD CONSTRAINT alicia_sentences_trace_id_check CHECK (trace_id ~ '^[0-9a-f]{32}$' AND trace_id <> repeat('0', 32));
ALTER TABLE alicia_tool_uses ADD COLUMN trace_id text,
    ADD CONSTRAINT alicia_tool_uses_trace_id_check CHECK (trace_id ~ '^[0-9a-f]{32}$' AND trace_id <> repeat('0', 32));
ALTER TABLE alicia_reasoning_steps ADD COLUMN trace_id text,
    ADD CONSTRAINT alicia_reasoning_steps_trace_id_check CHECK (trace_id ~ '^[0-9a-f]{32}$' AND trace_id <> repeat('0', 32));
ALTER TABLE alicia_memory_used ADD COLUMN trace_id text,
    ADD CONSTRAINT alicia_memory_used_trace_id_check CHECK (trace_id ~ '^[0-9a-f]{32}$' AND trace_id <> repeat('0', 32));

-- Moving a trace id from alicia_meta into its row does not change the row:
-- updated_at stays what it was (the trigger would set it to now()).
ALTER TABLE alicia_messages DISABLE TRIGGER alicia_messages_set_updated_at;
ALTER TABLE alicia_sentences DISABLE TRIGGER alicia_sentences_set_updated_at;
ALTER TABLE alicia_tool_uses DISABLE TRIGGER alicia_tool_uses_set_updated_at;
ALTER TABLE alicia_reasoning_steps DISABLE TRIGGER alicia_reasoning_steps_set_updated_at;
ALTER TABLE alicia_memory_used DISABLE TRIGGER alicia_memory_used_set_updated_at;

-- A meta row's ref is the id of the row its envelope named; only live meta
-- rows holding a valid trace id are moved (the others fail the CHECK).
UPDATE alicia_messages t SET trace_id = m.value FROM alicia_meta m
    WHERE m.ref = t.id AND m.key = 'messaging.trace_id' AND m.deleted_at IS NULL
      AND m.value ~ '^[0-9a-f]{32}$' AND m.value <> repeat('0', 32);
UPDATE alicia_sentences t SET trace_id = m.value FROM alicia_meta m
    WHERE m.ref = t.id AND m.key = 'messaging.trace_id' AND m.deleted_at IS NULL
      AND m.value ~ '^[0-9a-f]{32}$' AND m.value <> repeat('0', 32);
UPDATE alicia_tool_uses t SET trace_id = m.value FROM alicia_meta m
    WHERE m.ref = t.id AND m.key = 'messaging.trace_id' AND m.deleted_at IS NULL
      AND m.value ~ '^[0-9a-f]{32}$' AND m.value <> repeat('0', 32);
UPDATE alicia_reasoning_steps t SET trace_id = m.value FROM alicia_meta m
    WHERE m.ref = t.id AND m.key = 'messaging.trace_id' AND m.deleted_at IS NULL
      AND m.value ~ '^[0-9a-f]{32}$' AND m.value <> repeat('0', 32);
UPDATE alicia_memory_used t SET trace_id = m.value FROM alicia_meta m
    WHERE m.ref = t.id AND m.key = 'messaging.trace_id' AND m.deleted_at IS NULL
      AND m.value ~ '^[0-9a-f]{32}$' AND m.value <> repeat('0', 32);

ALTER TABLE alicia_messages ENABLE TRIGGER alicia_messages_set_updated_at;
ALTER TABLE alicia_sentences ENABLE TRIGGER alicia_sentences_set_updated_at;
ALTER TABLE alicia_tool_uses ENABLE TRIGGER alicia_tool_uses_set_updated_at;
ALTER TABLE alicia_reasoning_steps ENABLE TRIGGER alicia_reasoning_steps_set_updated_at;
ALTER TABLE alicia_memory_used ENABLE TRIGGER alicia_memory_used_set_updated_at;

-- The trace context leaves alicia_meta, including the trace ids of rows that
-- have no trace_id column (conversations, votes, audio, …) and span ids.
DELETE FROM alicia_meta WHERE key IN ('messaging.trace_id', 'messaging.span_id');

CREATE INDEX idx_messages_trace ON alicia_messages (trace_id) WHERE trace_id IS NOT NULL;
CREATE INDEX idx_sentences_trace ON alicia_sentences (trace_id) WHERE trace_id IS NOT NULL;
CREATE INDEX idx_tool_uses_trace ON alicia_tool_uses (trace_id) WHERE trace_id IS NOT NULL;
CREATE INDEX idx_reasoning_steps_trace ON alicia_reasoning_steps (trace_id) WHERE trace_id IS NOT NULL;
CREATE INDEX idx_memory_used_trace ON alicia_memory_used (trace_id) WHERE trace_id IS NOT NULL;

-- +goose Down
-- The trace ids go back to alicia_meta as messaging.trace_id rows on their
-- row's id. What Up deleted without a column to keep it (span ids, trace ids
-- of other rows) does not come back.
INSERT INTO alicia_meta (ref, key, value)
    SELECT id, 'messaging.trace_id', trace_id FROM alicia_messages WHERE trace_id IS NOT NULL
    UNION ALL
    SELECT id, 'messaging.trace_id', trace_id FROM alicia_sentences WHERE trace_id IS NOT NULL
    UNION ALL
    SELECT id, 'messaging.trace_id', trace_id FROM alicia_tool_uses WHERE trace_id IS NOT NULL
    UNION ALL
    SELECT id, 'messaging.trace_id', trace_id FROM alicia_reasoning_steps WHERE trace_id IS NOT NULL
    UNION ALL
    SELECT id, 'messaging.trace_id', trace_id FROM alicia_memory_used WHERE trace_id IS NOT NULL
ON CONFLICT (ref, key) DO NOTHING;

-- Dropping a column drops its CHECK constraint and its index.
ALTER TABLE alicia_memory_used DROP COLUMN IF EXISTS trace_id;
ALTER TABLE alicia_reasoning_steps DROP COLUMN IF EXISTS trace_id;
ALTER TABLE alicia_tool_uses DROP COLUMN IF EXISTS trace_id;
ALTER TABLE alicia_sentences DROP COLUMN IF EXISTS trace_id;
ALTER TABLE alicia_messages DROP COLUMN IF EXISTS trace_id;
