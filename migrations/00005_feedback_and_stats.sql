-- User commentaries, votes (Feedback), notes (UserNote) and per-conversation
-- session statistics (SessionStats).

-- +goose Up
CREATE TYPE vote_value AS ENUM ('up', 'down', 'critical');
CREATE TYPE feedback_target_type AS ENUM ('message', 'sentence', 'tool_use', 'memory', 'reasoning', 'memory_usage');
CREATE TYPE note_category AS ENUM ('improvement', 'correction', 'context', 'general');

CREATE TABLE alicia_user_conversation_commentaries (
    id               text PRIMARY KEY DEFAULT generate_random_id('aucc'),
    conversation_id  text NOT NULL REFERENCES alicia_conversations (id) ON DELETE CASCADE,
    message_id       text REFERENCES alicia_messages (id) ON DELETE CASCADE,
    content          text NOT NULL,
    commentary_type  text,
    created_by       text,
    meta             jsonb NOT NULL DEFAULT '{}',
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    deleted_at       timestamptz
);

CREATE INDEX idx_commentaries_conversation ON alicia_user_conversation_commentaries (conversation_id, created_at DESC)
    WHERE deleted_at IS NULL;
CREATE INDEX idx_commentaries_message ON alicia_user_conversation_commentaries (message_id)
    WHERE message_id IS NOT NULL;

-- One vote per (user, target). The protocol's vote 'remove' is not a value:
-- it soft-deletes the row (deleted_at), and a later vote upserts it back.
CREATE TABLE alicia_votes (
    id               text PRIMARY KEY DEFAULT generate_random_id('av'),
    conversation_id  text NOT NULL REFERENCES alicia_conversations (id) ON DELETE CASCADE,
    message_id       text NOT NULL REFERENCES alicia_messages (id) ON DELETE CASCADE,
    target_type      feedback_target_type NOT NULL,
    target_id        text NOT NULL,
    vote             vote_value NOT NULL,
    quick_feedback   text,
    note             text,
    user_id          text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    deleted_at       timestamptz,
    -- NULLS NOT DISTINCT: a single-user install has user_id NULL and must
    -- still get one vote per target.
    CONSTRAINT alicia_votes_user_target_key UNIQUE NULLS NOT DISTINCT (user_id, target_type, target_id)
);

-- Aggregates for FeedbackConfirmation (upvotes/downvotes of a target).
CREATE INDEX idx_votes_target ON alicia_votes (target_type, target_id, vote) WHERE deleted_at IS NULL;
CREATE INDEX idx_votes_message ON alicia_votes (message_id);
CREATE INDEX idx_votes_conversation ON alicia_votes (conversation_id);

CREATE TABLE alicia_notes (
    id               text PRIMARY KEY DEFAULT generate_random_id('an'),
    conversation_id  text NOT NULL REFERENCES alicia_conversations (id) ON DELETE CASCADE,
    message_id       text NOT NULL REFERENCES alicia_messages (id) ON DELETE CASCADE,
    content          text NOT NULL,
    category         note_category NOT NULL DEFAULT 'general',
    user_id          text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    deleted_at       timestamptz
);

CREATE INDEX idx_notes_message ON alicia_notes (message_id, created_at) WHERE deleted_at IS NULL;
CREATE INDEX idx_notes_conversation ON alicia_notes (conversation_id);

-- One row per conversation, upserted by the persistence service.
CREATE TABLE alicia_session_stats (
    conversation_id      text PRIMARY KEY REFERENCES alicia_conversations (id) ON DELETE CASCADE,
    message_count        integer NOT NULL DEFAULT 0,
    tool_call_count      integer NOT NULL DEFAULT 0,
    memories_used        integer NOT NULL DEFAULT 0,
    session_duration_ms  bigint NOT NULL DEFAULT 0,
    session_started_at   timestamptz,
    last_activity_at     timestamptz,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT alicia_session_stats_counts_check CHECK (
        message_count >= 0 AND tool_call_count >= 0 AND memories_used >= 0 AND session_duration_ms >= 0
    )
);

CREATE TRIGGER alicia_user_conversation_commentaries_set_updated_at BEFORE UPDATE ON alicia_user_conversation_commentaries
    FOR EACH ROW EXECUTE FUNCTION alicia_set_updated_at();
CREATE TRIGGER alicia_votes_set_updated_at BEFORE UPDATE ON alicia_votes
    FOR EACH ROW EXECUTE FUNCTION alicia_set_updated_at();
CREATE TRIGGER alicia_notes_set_updated_at BEFORE UPDATE ON alicia_notes
    FOR EACH ROW EXECUTE FUNCTION alicia_set_updated_at();
CREATE TRIGGER alicia_session_stats_set_updated_at BEFORE UPDATE ON alicia_session_stats
    FOR EACH ROW EXECUTE FUNCTION alicia_set_updated_at();

-- +goose Down
DROP TABLE IF EXISTS alicia_session_stats;
DROP TABLE IF EXISTS alicia_notes;
DROP TABLE IF EXISTS alicia_votes;
DROP TABLE IF EXISTS alicia_user_conversation_commentaries;
DROP TYPE IF EXISTS note_category;
DROP TYPE IF EXISTS feedback_target_type;
DROP TYPE IF EXISTS vote_value;
