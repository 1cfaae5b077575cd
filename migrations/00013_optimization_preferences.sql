-- What the prompt optimiser's people choose (issue 29): their dimension
-- weights (DimensionPreference, type 29), whether installation-wide runs may
-- learn from their conversations (LearningConsent, type 73) and which elite
-- they promoted (EliteSelect, type 31); and what the gateway shows of an
-- elite (its example answers, on how many validation examples it is best).
-- persistence writes them from alicia.sys.* envelopes; the acting person is
-- the envelope's meta alicia.user_id (set by the gateway, never by a client).

-- +goose Up
-- Every DimensionPreference is kept (a history of who weighted what); the
-- latest of a scope holds: the installation's whoever set it (an
-- administrator), a person's by their user_id.
CREATE TABLE alicia_dimension_preferences (
    id          text PRIMARY KEY,
    scope       text NOT NULL,
    -- Who set it (for an installation preference, the administrator).
    user_id     text NOT NULL,
    -- {correctness, faithfulness, relevancy, userFeedback, brevity, latency}: 0..1 each.
    weights     jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT alicia_dimension_preferences_scope_check CHECK (scope IN ('user', 'installation'))
);
CREATE INDEX idx_dimension_preferences_installation ON alicia_dimension_preferences (created_at DESC, id DESC)
    WHERE scope = 'installation';
CREATE INDEX idx_dimension_preferences_user ON alicia_dimension_preferences (user_id, created_at DESC, id DESC)
    WHERE scope = 'user';

-- A person's latest choice (LearningConsent): share true lets
-- installation-wide runs learn from their conversations.
CREATE TABLE alicia_learning_consents (
    user_id     text PRIMARY KEY,
    share       boolean NOT NULL,
    -- When they chose (LearningConsent.timestamp): an older choice replayed never overrides a newer one.
    chosen_at   timestamptz NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX idx_learning_consents_sharing ON alicia_learning_consents (user_id) WHERE share;
CREATE TRIGGER alicia_learning_consents_set_updated_at BEFORE UPDATE ON alicia_learning_consents
    FOR EACH ROW EXECUTE FUNCTION alicia_set_updated_at();

-- An elite as reported (EliteOptions): on how many validation examples it
-- is best, and its example answers beside today's
-- [{messageId, question, current, candidate}]. A promotion (EliteSelect):
-- who (selected_by), when (selected_at), the selection's id, and the
-- versions made from it (prompt_version_ids, 00012).
ALTER TABLE prompt_candidates
    ADD COLUMN best_on integer,
    ADD COLUMN examples jsonb,
    ADD COLUMN selection_id text,
    ADD COLUMN selected_by text,
    ADD COLUMN selected_at timestamptz,
    ADD CONSTRAINT prompt_candidates_selected_check CHECK ((selected_at IS NULL) = (selected_by IS NULL));

-- +goose Down
ALTER TABLE prompt_candidates
    DROP CONSTRAINT IF EXISTS prompt_candidates_selected_check,
    DROP COLUMN IF EXISTS selected_at,
    DROP COLUMN IF EXISTS selected_by,
    DROP COLUMN IF EXISTS selection_id,
    DROP COLUMN IF EXISTS examples,
    DROP COLUMN IF EXISTS best_on;
DROP TABLE IF EXISTS alicia_learning_consents;
DROP TABLE IF EXISTS alicia_dimension_preferences;
