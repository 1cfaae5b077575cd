-- Everyday use (issue 30): a person's defaults and their timers and reminders.
--
-- alicia_user_settings: the latest UserSettings of a person (alicia.sys.user_settings):
-- the voice, speaking rate and language of their conversations, the time zone
-- the times they say are read in, and hands-free mode. A NULL column falls back
-- to the installation's default; a conversation's own Configuration
-- (alicia_conversations.preferences: voice, speechSpeed, preferredLanguage,
-- wakeWord) overrides them. set_at is UserSettings.timestamp: a replayed older
-- one never overrides a newer one.
--
-- alicia_timers: a timer or reminder in its latest state (Timer envelopes on
-- alicia.sys.timer): scheduled until fired (delivered: delivered_as and the
-- message it became) or cancelled; state_at is the latest state's timestamp.
-- A fired or cancelled timer never changes again. No foreign key to the
-- conversation: the SYSTEM stream may be applied before the conversation's first
-- row, and a timer must never be lost for that; one of a deleted conversation
-- is not delivered.

-- +goose Up
CREATE TABLE alicia_user_settings (
    user_id      text PRIMARY KEY,
    voice        text,
    speech_speed real,
    language     text,
    time_zone    text,
    wake_word    boolean,
    set_at       timestamptz NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT alicia_user_settings_speech_speed_check CHECK (speech_speed IS NULL OR speech_speed BETWEEN 0.5 AND 2)
);
CREATE TRIGGER alicia_user_settings_set_updated_at BEFORE UPDATE ON alicia_user_settings
    FOR EACH ROW EXECUTE FUNCTION alicia_set_updated_at();

CREATE TABLE alicia_timers (
    id              text PRIMARY KEY,
    user_id         text NOT NULL,
    conversation_id text NOT NULL,
    kind            text NOT NULL,
    label           text NOT NULL DEFAULT '',
    due_at          timestamptz NOT NULL,
    time_zone       text NOT NULL DEFAULT 'UTC',
    status          text NOT NULL,
    delivered_as    text,
    message_id      text,
    state_at        timestamptz NOT NULL,
    fired_at        timestamptz,
    cancelled_at    timestamptz,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT alicia_timers_kind_check CHECK (kind IN ('timer', 'reminder')),
    CONSTRAINT alicia_timers_status_check CHECK (status IN ('scheduled', 'cancelled', 'fired')),
    CONSTRAINT alicia_timers_delivered_as_check CHECK (delivered_as IS NULL OR delivered_as IN ('spoken', 'message'))
);
CREATE INDEX idx_timers_due ON alicia_timers (due_at) WHERE status = 'scheduled';
CREATE INDEX idx_timers_user ON alicia_timers (user_id, status, due_at);
CREATE INDEX idx_timers_conversation ON alicia_timers (conversation_id);
CREATE TRIGGER alicia_timers_set_updated_at BEFORE UPDATE ON alicia_timers
    FOR EACH ROW EXECUTE FUNCTION alicia_set_updated_at();

-- +goose Down
DROP TABLE IF EXISTS alicia_timers;
DROP TABLE IF EXISTS alicia_user_settings;
