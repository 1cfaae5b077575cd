-- Versioned prompt components (issue 29). The prompts that shape an answer
-- are named components - system, voice_style, memory_extraction,
-- demonstrations, tool:<name> - each with numbered versions, installation-
-- wide (user_id NULL) or one person's (user_id set). A version travels as a
-- PromptVersion on alicia.sys.prompt_version and persistence writes it here:
-- the first envelope of an id creates the row, a later one with the same id
-- changes only status and rollout_share.
--
-- Rollout: an active version with rollout_share 1 (absent in the envelope)
-- is the scope's version of the component; activating one retires every
-- other active version of the same component and scope. An active version
-- with rollout_share s < 1 is rolling out: it serves the new conversations
-- whose id hashes below s, the rest keep the scope's full version (or, for
-- a person without one, the installation's); activating one retires only
-- the other versions rolling out in that scope, never the full one.
--
-- alicia_messages.prompt_versions are the versions that shaped an
-- assistant message (StartAnswer.promptVersions), so every vote and judged
-- score traces back to a version.

-- +goose Up
CREATE TABLE alicia_prompt_versions (
    id             text PRIMARY KEY,
    component      text NOT NULL,
    version        integer NOT NULL,
    text           text NOT NULL,
    parent_id      text,
    -- NULL: installation-wide.
    user_id        text,
    status         text NOT NULL,
    -- NULL: all new conversations (1).
    rollout_share  real,
    created_by     text NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT alicia_prompt_versions_status_check CHECK (status IN ('candidate', 'active', 'retired')),
    CONSTRAINT alicia_prompt_versions_rollout_share_check CHECK (rollout_share BETWEEN 0 AND 1),
    CONSTRAINT alicia_prompt_versions_version_check CHECK (version >= 1),
    CONSTRAINT alicia_prompt_versions_component_check CHECK (component IN ('system', 'voice_style', 'memory_extraction', 'demonstrations')
        OR component ~ '^tool:.+')
);

-- One version number per component and scope.
CREATE UNIQUE INDEX idx_prompt_versions_scope_version ON alicia_prompt_versions (component, COALESCE(user_id, ''), version);
CREATE TRIGGER alicia_prompt_versions_set_updated_at BEFORE UPDATE ON alicia_prompt_versions
    FOR EACH ROW EXECUTE FUNCTION alicia_set_updated_at();
-- The versions that may serve (active, rolling out) or be promoted (candidates).
CREATE INDEX idx_prompt_versions_live ON alicia_prompt_versions (component, user_id) WHERE status <> 'retired';

ALTER TABLE alicia_messages ADD COLUMN prompt_versions text[];
CREATE INDEX idx_messages_prompt_versions ON alicia_messages USING gin (prompt_versions) WHERE prompt_versions IS NOT NULL;

-- The GEPA optimiser's tables (the seeds' names), created now and filled
-- by the optimiser's runs.
--
-- A run optimises components for a scope (one person's, or the
-- installation's learning from the administrator and those who opted in)
-- within a budget of metric calls; progress is its last report.
CREATE TABLE prompt_optimization_runs (
    id            text PRIMARY KEY,
    -- 'user' (user_id's conversations, changes only their answers) or 'installation'.
    scope         text NOT NULL,
    user_id       text,
    components    text[] NOT NULL,
    -- Budget in metric calls (one candidate scored on one example).
    budget        integer NOT NULL,
    -- Dimension weights (correctness, faithfulness, relevancy, userFeedback, brevity, latency).
    weights       jsonb NOT NULL DEFAULT '{}',
    status        text NOT NULL DEFAULT 'queued',
    -- {iteration, metricCalls, frontSize, bestScores: {dimension: score}}.
    progress      jsonb NOT NULL DEFAULT '{}',
    error         text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    started_at    timestamptz,
    finished_at   timestamptz,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT prompt_optimization_runs_scope_check CHECK (scope IN ('user', 'installation')),
    CONSTRAINT prompt_optimization_runs_user_check CHECK (scope <> 'user' OR user_id IS NOT NULL),
    CONSTRAINT prompt_optimization_runs_status_check CHECK (status IN ('queued', 'running', 'done', 'failed', 'cancelled')),
    CONSTRAINT prompt_optimization_runs_budget_check CHECK (budget > 0)
);
CREATE INDEX idx_prompt_optimization_runs_user ON prompt_optimization_runs (user_id, created_at);
CREATE TRIGGER prompt_optimization_runs_set_updated_at BEFORE UPDATE ON prompt_optimization_runs
    FOR EACH ROW EXECUTE FUNCTION alicia_set_updated_at();

-- A candidate of a run: the texts of the components it changes (name ->
-- text), the candidates it came from (one by reflective mutation, two by
-- merge), and its validation scores (mean per dimension, and the weighted
-- aggregate).
CREATE TABLE prompt_candidates (
    id            text PRIMARY KEY,
    run_id        text NOT NULL REFERENCES prompt_optimization_runs (id) ON DELETE CASCADE,
    parent_ids    text[] NOT NULL DEFAULT '{}',
    components    jsonb NOT NULL,
    scores        jsonb NOT NULL DEFAULT '{}',
    score         real,
    on_front      boolean NOT NULL DEFAULT false,
    -- The version promoted from it, once a person promoted it (EliteSelect).
    prompt_version_ids text[],
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX idx_prompt_candidates_run ON prompt_candidates (run_id);

-- A candidate's score on one stored turn (the example): per dimension, and
-- the textual feedback the reflection model read (notes, vote reasons,
-- judge rationale).
CREATE TABLE prompt_evaluations (
    id            text PRIMARY KEY,
    candidate_id  text NOT NULL REFERENCES prompt_candidates (id) ON DELETE CASCADE,
    -- The stored answer replayed (alicia_messages.id; no foreign key: a
    -- deleted conversation leaves its run's evaluations readable).
    message_id    text NOT NULL,
    scores        jsonb NOT NULL DEFAULT '{}',
    answer        text NOT NULL DEFAULT '',
    feedback      text NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT prompt_evaluations_candidate_message_key UNIQUE (candidate_id, message_id)
);

-- +goose Down
DROP TABLE IF EXISTS prompt_evaluations;
DROP TABLE IF EXISTS prompt_candidates;
DROP TABLE IF EXISTS prompt_optimization_runs;
DROP INDEX IF EXISTS idx_messages_prompt_versions;
ALTER TABLE alicia_messages DROP COLUMN IF EXISTS prompt_versions;
DROP TABLE IF EXISTS alicia_prompt_versions;
