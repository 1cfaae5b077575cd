-- Conversations, messages (a tree through previous_id), audio, sentences and
-- envelope metadata. See README.md for the reasoning behind each constraint.

-- +goose Up
CREATE TYPE conversation_status AS ENUM ('active', 'archived', 'deleted');
CREATE TYPE message_role AS ENUM ('user', 'assistant', 'system');
CREATE TYPE completion_status AS ENUM ('pending', 'streaming', 'completed', 'failed');
CREATE TYPE sync_status AS ENUM ('pending', 'synced', 'conflict');
CREATE TYPE audio_type AS ENUM ('input', 'output');
CREATE TYPE playout_status AS ENUM ('pending', 'played', 'interrupted', 'unplayed');

CREATE TABLE alicia_conversations (
    id                     text PRIMARY KEY DEFAULT generate_random_id('ac'),
    user_id                text,
    title                  text NOT NULL DEFAULT '',
    status                 conversation_status NOT NULL DEFAULT 'active',
    livekit_room_name      text,
    preferences            jsonb NOT NULL DEFAULT '{}',
    last_client_stanza_id  integer NOT NULL DEFAULT 0,
    last_server_stanza_id  integer NOT NULL DEFAULT 0,
    -- Head of the current branch; FK added below, once alicia_messages exists.
    tip_message_id         text,
    -- Scores carried over from the console agent (0..1, neutral 0.5).
    user_feedback          double precision NOT NULL DEFAULT 0.5,
    correctness            double precision NOT NULL DEFAULT 0.5,
    faithfulness           double precision NOT NULL DEFAULT 0.5,
    relevancy              double precision NOT NULL DEFAULT 0.5,
    retrieval_count        integer NOT NULL DEFAULT 0,
    last_retrieved         timestamptz,
    total_duration_ms      bigint NOT NULL DEFAULT 0,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now(),
    deleted_at             timestamptz,
    CONSTRAINT alicia_conversations_livekit_room_name_key UNIQUE (livekit_room_name),
    CONSTRAINT alicia_conversations_client_stanza_check CHECK (last_client_stanza_id >= 0),
    CONSTRAINT alicia_conversations_server_stanza_check CHECK (last_server_stanza_id <= 0),
    CONSTRAINT alicia_conversations_user_feedback_check CHECK (user_feedback BETWEEN 0 AND 1),
    CONSTRAINT alicia_conversations_correctness_check CHECK (correctness BETWEEN 0 AND 1),
    CONSTRAINT alicia_conversations_faithfulness_check CHECK (faithfulness BETWEEN 0 AND 1),
    CONSTRAINT alicia_conversations_relevancy_check CHECK (relevancy BETWEEN 0 AND 1),
    CONSTRAINT alicia_conversations_retrieval_count_check CHECK (retrieval_count >= 0),
    CONSTRAINT alicia_conversations_total_duration_check CHECK (total_duration_ms >= 0)
) WITH (fillfactor = 70); -- updated once per batch: room on the page keeps updates HOT

CREATE INDEX idx_conversations_user_recent ON alicia_conversations (user_id, updated_at DESC)
    WHERE deleted_at IS NULL;
CREATE INDEX idx_conversations_status ON alicia_conversations (status)
    WHERE deleted_at IS NULL;

CREATE TABLE alicia_messages (
    id                      text PRIMARY KEY DEFAULT generate_random_id('am'),
    conversation_id         text NOT NULL REFERENCES alicia_conversations (id) ON DELETE CASCADE,
    sequence_number         integer NOT NULL,
    previous_id             text,
    message_role            message_role NOT NULL,
    contents                text NOT NULL DEFAULT '',
    local_id                text,
    server_id               text,
    sync_status             sync_status NOT NULL DEFAULT 'synced',
    synced_at               timestamptz,
    completion_status       completion_status NOT NULL DEFAULT 'completed',
    -- FK added below, once alicia_audio exists.
    audio_id                text,
    processing_duration_ms  integer,
    -- Set when a ControlStop cut a streaming answer; contents keeps the partial text.
    interrupted_at          timestamptz,
    created_at              timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now(),
    deleted_at              timestamptz,
    -- Target of the composite FKs below (a message's parent and a
    -- conversation's tip must belong to the same conversation).
    CONSTRAINT alicia_messages_conversation_id_id_key UNIQUE (conversation_id, id),
    CONSTRAINT alicia_messages_local_id_key UNIQUE (conversation_id, local_id),
    CONSTRAINT alicia_messages_server_id_key UNIQUE (server_id),
    CONSTRAINT alicia_messages_previous_fkey FOREIGN KEY (conversation_id, previous_id)
        REFERENCES alicia_messages (conversation_id, id) ON DELETE SET NULL (previous_id),
    CONSTRAINT alicia_messages_not_own_parent CHECK (previous_id IS NULL OR previous_id <> id),
    CONSTRAINT alicia_messages_sequence_check CHECK (sequence_number >= 0),
    CONSTRAINT alicia_messages_duration_check CHECK (processing_duration_ms IS NULL OR processing_duration_ms >= 0)
) WITH (fillfactor = 70); -- contents grow while an answer streams: room for HOT updates

-- History of a conversation in order (the main read path).
CREATE INDEX idx_messages_conversation_history ON alicia_messages (conversation_id, sequence_number, created_at)
    WHERE deleted_at IS NULL;
-- Children / siblings of a message (branch navigation, BranchUpdate.siblingIds).
CREATE INDEX idx_messages_previous ON alicia_messages (previous_id)
    WHERE previous_id IS NOT NULL;
-- Answers left pending/streaming by a crash, for recovery sweeps.
CREATE INDEX idx_messages_incomplete ON alicia_messages (conversation_id, created_at)
    WHERE deleted_at IS NULL AND completion_status IN ('pending', 'streaming');

ALTER TABLE alicia_conversations
    ADD CONSTRAINT alicia_conversations_tip_fkey FOREIGN KEY (id, tip_message_id)
        REFERENCES alicia_messages (conversation_id, id)
        ON DELETE SET NULL (tip_message_id)
        DEFERRABLE INITIALLY DEFERRED;

CREATE TABLE alicia_audio (
    id                  text PRIMARY KEY DEFAULT generate_random_id('aa'),
    conversation_id     text REFERENCES alicia_conversations (id) ON DELETE CASCADE,
    message_id          text REFERENCES alicia_messages (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
    audio_type          audio_type NOT NULL,
    audio_format        text,
    audio_data          bytea,
    duration_ms         integer,
    transcription       text,
    livekit_track_sid   text,
    transcription_meta  jsonb NOT NULL DEFAULT '{}',
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    deleted_at          timestamptz,
    CONSTRAINT alicia_audio_duration_check CHECK (duration_ms IS NULL OR duration_ms >= 0)
);

CREATE INDEX idx_audio_message ON alicia_audio (message_id) WHERE message_id IS NOT NULL;
CREATE INDEX idx_audio_conversation ON alicia_audio (conversation_id) WHERE conversation_id IS NOT NULL;
CREATE INDEX idx_audio_track_sid ON alicia_audio (livekit_track_sid) WHERE livekit_track_sid IS NOT NULL;

ALTER TABLE alicia_messages
    ADD CONSTRAINT alicia_messages_audio_fkey FOREIGN KEY (audio_id)
        REFERENCES alicia_audio (id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED;
CREATE INDEX idx_messages_audio ON alicia_messages (audio_id) WHERE audio_id IS NOT NULL;

-- One row per sentence of an answer, with the UNIQUE key and the
-- playout columns used on barge-in.
CREATE TABLE alicia_sentences (
    id TEXT PRIMARY KEY DEFAULT generate_random_id('ams'),
    message_id TEXT NOT NULL REFERENCES alicia_messages(id) ON DELETE CASCADE,
    sentence_sequence_number INTEGER NOT NULL,
    text TEXT NOT NULL DEFAULT '',
    audio_type audio_type,
    audio_format TEXT,
    duration_ms INTEGER,
    audio_bytesize INTEGER,
    audio_data BYTEA,
    meta JSONB DEFAULT '{}',
    completion_status completion_status NOT NULL DEFAULT 'completed',
    playout_status playout_status NOT NULL DEFAULT 'pending',
    played_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT NOW(),
    updated_at timestamptz NOT NULL DEFAULT NOW(),
    deleted_at timestamptz,
    CONSTRAINT alicia_sentences_message_sequence_key UNIQUE (message_id, sentence_sequence_number),
    CONSTRAINT alicia_sentences_sequence_check CHECK (sentence_sequence_number >= 1),
    CONSTRAINT alicia_sentences_duration_check CHECK (duration_ms IS NULL OR duration_ms >= 0),
    CONSTRAINT alicia_sentences_bytesize_check CHECK (audio_bytesize IS NULL OR audio_bytesize >= 0)
);

CREATE INDEX idx_sentences_message ON alicia_sentences(message_id, sentence_sequence_number) WHERE deleted_at IS NULL;
CREATE INDEX idx_sentences_completion_status ON alicia_sentences(completion_status) WHERE deleted_at IS NULL AND completion_status != 'completed';
CREATE INDEX idx_sentences_orphaned ON alicia_sentences(message_id, completion_status, created_at) WHERE deleted_at IS NULL AND completion_status IN ('pending', 'streaming', 'failed');

-- Envelope meta (one row per key) attached to any entity by id.
CREATE TABLE alicia_meta (
    id          text PRIMARY KEY DEFAULT generate_random_id('amt'),
    ref         text NOT NULL,
    key         text NOT NULL,
    value       text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    deleted_at  timestamptz,
    CONSTRAINT alicia_meta_ref_key_key UNIQUE (ref, key)
);

CREATE TRIGGER alicia_conversations_set_updated_at BEFORE UPDATE ON alicia_conversations
    FOR EACH ROW EXECUTE FUNCTION alicia_set_updated_at();
CREATE TRIGGER alicia_messages_set_updated_at BEFORE UPDATE ON alicia_messages
    FOR EACH ROW EXECUTE FUNCTION alicia_set_updated_at();
CREATE TRIGGER alicia_audio_set_updated_at BEFORE UPDATE ON alicia_audio
    FOR EACH ROW EXECUTE FUNCTION alicia_set_updated_at();
CREATE TRIGGER alicia_sentences_set_updated_at BEFORE UPDATE ON alicia_sentences
    FOR EACH ROW EXECUTE FUNCTION alicia_set_updated_at();
CREATE TRIGGER alicia_meta_set_updated_at BEFORE UPDATE ON alicia_meta
    FOR EACH ROW EXECUTE FUNCTION alicia_set_updated_at();

-- +goose Down
DROP TABLE IF EXISTS alicia_meta;
DROP TABLE IF EXISTS alicia_sentences;
ALTER TABLE IF EXISTS alicia_messages DROP CONSTRAINT IF EXISTS alicia_messages_audio_fkey;
DROP TABLE IF EXISTS alicia_audio;
ALTER TABLE IF EXISTS alicia_conversations DROP CONSTRAINT IF EXISTS alicia_conversations_tip_fkey;
DROP TABLE IF EXISTS alicia_messages;
DROP TABLE IF EXISTS alicia_conversations;
DROP TYPE IF EXISTS playout_status;
DROP TYPE IF EXISTS audio_type;
DROP TYPE IF EXISTS sync_status;
DROP TYPE IF EXISTS completion_status;
DROP TYPE IF EXISTS message_role;
DROP TYPE IF EXISTS conversation_status;
