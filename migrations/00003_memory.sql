-- Long-term memory (pgvector) and the log of which memories were used where.

-- +goose Up
CREATE TABLE alicia_memory (
    id                 text PRIMARY KEY DEFAULT generate_random_id('amem'),
    user_id            text,
    content            text NOT NULL,
    -- NULL until the embedding model has processed the content.
    embeddings         vector(1024),
    embeddings_info    jsonb NOT NULL DEFAULT '{}',
    importance         double precision NOT NULL DEFAULT 0.5,
    confidence         double precision NOT NULL DEFAULT 1.0,
    user_rating        integer,
    created_by         text,
    source_type        text,
    source_info        jsonb NOT NULL DEFAULT '{}',
    source_message_id  text REFERENCES alicia_messages (id) ON DELETE SET NULL,
    tags               text[] NOT NULL DEFAULT '{}',
    pinned             boolean NOT NULL DEFAULT false,
    archived           boolean NOT NULL DEFAULT false,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    deleted_at         timestamptz,
    CONSTRAINT alicia_memory_importance_check CHECK (importance BETWEEN 0 AND 1),
    CONSTRAINT alicia_memory_confidence_check CHECK (confidence BETWEEN 0 AND 1),
    CONSTRAINT alicia_memory_user_rating_check CHECK (user_rating IS NULL OR user_rating BETWEEN 1 AND 5)
);

-- Semantic search: ORDER BY embeddings <=> $1 (cosine distance).
CREATE INDEX idx_memory_embeddings_hnsw ON alicia_memory USING hnsw (embeddings vector_cosine_ops);
-- Tag filters: WHERE tags @> ARRAY['x'] / tags && ARRAY[...].
CREATE INDEX idx_memory_tags ON alicia_memory USING gin (tags);
-- A user's visible memories, pinned first (memory list, MemoryAction pin).
CREATE INDEX idx_memory_user_visible ON alicia_memory (user_id, pinned DESC, updated_at DESC)
    WHERE deleted_at IS NULL AND NOT archived;
CREATE INDEX idx_memory_source_message ON alicia_memory (source_message_id)
    WHERE source_message_id IS NOT NULL;

CREATE TABLE alicia_memory_used (
    id                   text PRIMARY KEY DEFAULT generate_random_id('amu'),
    conversation_id      text NOT NULL REFERENCES alicia_conversations (id) ON DELETE CASCADE,
    message_id           text NOT NULL REFERENCES alicia_messages (id) ON DELETE CASCADE,
    memory_id            text NOT NULL REFERENCES alicia_memory (id) ON DELETE CASCADE,
    query_prompt         text,
    query_prompt_meta    jsonb NOT NULL DEFAULT '{}',
    similarity_score     double precision,
    meta                 jsonb NOT NULL DEFAULT '{}',
    position_in_results  integer,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    deleted_at           timestamptz,
    CONSTRAINT alicia_memory_used_position_check CHECK (position_in_results IS NULL OR position_in_results >= 0)
);

-- "Which memories influenced this answer" (traceability).
CREATE INDEX idx_memory_used_message ON alicia_memory_used (message_id) WHERE deleted_at IS NULL;
-- Usage statistics per memory.
CREATE INDEX idx_memory_used_memory ON alicia_memory_used (memory_id, created_at) WHERE deleted_at IS NULL;
CREATE INDEX idx_memory_used_conversation ON alicia_memory_used (conversation_id);

CREATE TRIGGER alicia_memory_set_updated_at BEFORE UPDATE ON alicia_memory
    FOR EACH ROW EXECUTE FUNCTION alicia_set_updated_at();
CREATE TRIGGER alicia_memory_used_set_updated_at BEFORE UPDATE ON alicia_memory_used
    FOR EACH ROW EXECUTE FUNCTION alicia_set_updated_at();

-- +goose Down
DROP TABLE IF EXISTS alicia_memory_used;
DROP TABLE IF EXISTS alicia_memory;
