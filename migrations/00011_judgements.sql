-- Judged turns (issue 29). After an answer ends, the llm's judge asks a
-- judge model to score it: correctness, faithfulness (to the tool results
-- and memories the answer used) and relevancy, each in [0, 1], with a
-- one-sentence rationale, and publishes a TurnJudgement on the
-- conversation's agent subject. persistence stores it here, one row per
-- answer: a redelivered or repeated judgement of the same answer upserts
-- the row (message_id is the key), never a second one.
--
-- The conversation's aggregates are the console agent's columns of
-- alicia_conversations (00002): correctness, faithfulness and relevancy are
-- the means over its judged answers, written by persistence in the same
-- transaction as the row; user_feedback follows its votes (the feedback
-- apply, 00005). They stay at the neutral 0.5 until the first judgement.
-- Columns rather than a view: the conversation list reads them with every
-- conversation, and a judgement is written once per answer at most.

-- +goose Up
CREATE TABLE alicia_message_judgements (
    message_id       text PRIMARY KEY,
    conversation_id  text NOT NULL REFERENCES alicia_conversations (id) ON DELETE CASCADE,
    correctness      real NOT NULL,
    faithfulness     real NOT NULL,
    relevancy        real NOT NULL,
    rationale        text NOT NULL DEFAULT '',
    judge_model      text NOT NULL DEFAULT '',
    -- The trace of the envelope that made the row (see 00009).
    trace_id         text,
    -- When the judge made the judgement (TurnJudgement.createdAt).
    judged_at        timestamptz NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    -- The answer judged belongs to the conversation named.
    CONSTRAINT alicia_message_judgements_message_fkey FOREIGN KEY (conversation_id, message_id)
        REFERENCES alicia_messages (conversation_id, id) ON DELETE CASCADE,
    CONSTRAINT alicia_message_judgements_correctness_check CHECK (correctness BETWEEN 0 AND 1),
    CONSTRAINT alicia_message_judgements_faithfulness_check CHECK (faithfulness BETWEEN 0 AND 1),
    CONSTRAINT alicia_message_judgements_relevancy_check CHECK (relevancy BETWEEN 0 AND 1),
    CONSTRAINT alicia_message_judgements_trace_id_check CHECK (trace_id ~ '^[0-9a-f]{32}$' AND trace_id <> repeat('0', 32))
);

-- The conversation's means.
CREATE INDEX idx_message_judgements_conversation ON alicia_message_judgements (conversation_id);

CREATE TRIGGER alicia_message_judgements_set_updated_at BEFORE UPDATE ON alicia_message_judgements
    FOR EACH ROW EXECUTE FUNCTION alicia_set_updated_at();

-- +goose Down
DROP TABLE IF EXISTS alicia_message_judgements;
