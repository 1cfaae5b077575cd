-- Titles generated from a conversation's content (issue 30): where a
-- conversation's title came from, so that a generated title never replaces
-- one the person chose, and how many times one was generated (a new one
-- when the subject clearly changed, a few times at most).
--   none         no title yet
--   provisional  a client's placeholder (the first words of the first
--                message, "Voice conversation"): a generated title replaces it
--   generated    the llm's, from the conversation: a later one may replace it
--   person       set by the person (created with it, or renamed): kept
-- persistence sets them from ConversationUpdate (meta alicia.title_source).

-- +goose Up
ALTER TABLE alicia_conversations
    ADD COLUMN title_source text NOT NULL DEFAULT 'none',
    ADD COLUMN title_generations integer NOT NULL DEFAULT 0,
    ADD CONSTRAINT alicia_conversations_title_source_check CHECK (title_source IN ('none', 'provisional', 'generated', 'person'));
-- Titles stored before: kept as the person's.
UPDATE alicia_conversations SET title_source = 'person' WHERE title <> '';

-- +goose Down
ALTER TABLE alicia_conversations
    DROP CONSTRAINT IF EXISTS alicia_conversations_title_source_check,
    DROP COLUMN IF EXISTS title_generations,
    DROP COLUMN IF EXISTS title_source;
