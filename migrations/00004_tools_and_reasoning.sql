-- MCP servers, the tool registry, tool invocations and reasoning steps.

-- +goose Up
CREATE TYPE mcp_transport AS ENUM ('stdio', 'http');
CREATE TYPE mcp_server_status AS ENUM ('unknown', 'connecting', 'connected', 'disconnected', 'error');
CREATE TYPE tool_use_status AS ENUM ('pending', 'running', 'success', 'error', 'cancelled');
CREATE TYPE tool_execution AS ENUM ('server', 'client', 'either');

CREATE TABLE alicia_mcp_servers (
    id          text PRIMARY KEY DEFAULT generate_random_id('amcp'),
    name        text NOT NULL,
    transport   mcp_transport NOT NULL,
    command     text,
    args        text[] NOT NULL DEFAULT '{}',
    url         text,
    env         jsonb NOT NULL DEFAULT '{}',
    enabled     boolean NOT NULL DEFAULT true,
    status      mcp_server_status NOT NULL DEFAULT 'unknown',
    last_error  text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    deleted_at  timestamptz,
    CONSTRAINT alicia_mcp_servers_name_key UNIQUE (name),
    CONSTRAINT alicia_mcp_servers_transport_check CHECK (
        (transport = 'stdio' AND command IS NOT NULL AND command <> '')
        OR (transport = 'http' AND url IS NOT NULL AND url <> '')
    )
);

CREATE TABLE alicia_tools (
    id             text PRIMARY KEY DEFAULT generate_random_id('at'),
    name           text NOT NULL,
    description    text NOT NULL DEFAULT '',
    schema         jsonb NOT NULL DEFAULT '{}',
    enabled        boolean NOT NULL DEFAULT true,
    -- NULL for built-in tools; set for tools discovered from an MCP server.
    mcp_server_id  text REFERENCES alicia_mcp_servers (id) ON DELETE CASCADE,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    deleted_at     timestamptz,
    CONSTRAINT alicia_tools_name_key UNIQUE (name)
);

CREATE INDEX idx_tools_mcp_server ON alicia_tools (mcp_server_id) WHERE mcp_server_id IS NOT NULL;

CREATE TABLE alicia_tool_uses (
    id                      text PRIMARY KEY DEFAULT generate_random_id('atu'),
    conversation_id         text NOT NULL REFERENCES alicia_conversations (id) ON DELETE CASCADE,
    message_id              text NOT NULL REFERENCES alicia_messages (id) ON DELETE CASCADE,
    -- Not a FK to alicia_tools.name: client-side tools are not registered
    -- server-side, and the log must survive a tool being removed or renamed.
    tool_name               text NOT NULL,
    tool_arguments          jsonb NOT NULL DEFAULT '{}',
    tool_result             jsonb,
    status                  tool_use_status NOT NULL DEFAULT 'pending',
    execution               tool_execution NOT NULL DEFAULT 'server',
    timeout_ms              integer,
    error_code              text,
    error_message           text,
    sequence_number         integer NOT NULL DEFAULT 0,
    completed_at            timestamptz,
    processing_duration_ms  integer,
    created_at              timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now(),
    deleted_at              timestamptz,
    CONSTRAINT alicia_tool_uses_error_code_check CHECK (
        error_code IS NULL OR error_code IN ('unknown_tool', 'timeout', 'execution_error', 'invalid_parameters')
    ),
    CONSTRAINT alicia_tool_uses_timeout_check CHECK (timeout_ms IS NULL OR timeout_ms > 0),
    CONSTRAINT alicia_tool_uses_sequence_check CHECK (sequence_number >= 0),
    CONSTRAINT alicia_tool_uses_duration_check CHECK (processing_duration_ms IS NULL OR processing_duration_ms >= 0)
);

-- Tool calls of a message in order (interleaved with reasoning steps).
CREATE INDEX idx_tool_uses_message ON alicia_tool_uses (message_id, sequence_number) WHERE deleted_at IS NULL;
-- Failed / still running calls, newest first (debugging).
CREATE INDEX idx_tool_uses_status ON alicia_tool_uses (status, created_at DESC) WHERE deleted_at IS NULL;
CREATE INDEX idx_tool_uses_conversation ON alicia_tool_uses (conversation_id, created_at);
CREATE INDEX idx_tool_uses_tool_name ON alicia_tool_uses (tool_name, created_at);

CREATE TABLE alicia_reasoning_steps (
    id               text PRIMARY KEY DEFAULT generate_random_id('ar'),
    message_id       text NOT NULL REFERENCES alicia_messages (id) ON DELETE CASCADE,
    content          text NOT NULL DEFAULT '',
    sequence_number  integer NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    deleted_at       timestamptz,
    CONSTRAINT alicia_reasoning_steps_message_sequence_key UNIQUE (message_id, sequence_number),
    CONSTRAINT alicia_reasoning_steps_sequence_check CHECK (sequence_number >= 0)
);

CREATE TRIGGER alicia_mcp_servers_set_updated_at BEFORE UPDATE ON alicia_mcp_servers
    FOR EACH ROW EXECUTE FUNCTION alicia_set_updated_at();
CREATE TRIGGER alicia_tools_set_updated_at BEFORE UPDATE ON alicia_tools
    FOR EACH ROW EXECUTE FUNCTION alicia_set_updated_at();
CREATE TRIGGER alicia_tool_uses_set_updated_at BEFORE UPDATE ON alicia_tool_uses
    FOR EACH ROW EXECUTE FUNCTION alicia_set_updated_at();
CREATE TRIGGER alicia_reasoning_steps_set_updated_at BEFORE UPDATE ON alicia_reasoning_steps
    FOR EACH ROW EXECUTE FUNCTION alicia_set_updated_at();

-- +goose Down
DROP TABLE IF EXISTS alicia_reasoning_steps;
DROP TABLE IF EXISTS alicia_tool_uses;
DROP TABLE IF EXISTS alicia_tools;
DROP TABLE IF EXISTS alicia_mcp_servers;
DROP TYPE IF EXISTS tool_execution;
DROP TYPE IF EXISTS tool_use_status;
DROP TYPE IF EXISTS mcp_transport;
DROP TYPE IF EXISTS mcp_server_status;
