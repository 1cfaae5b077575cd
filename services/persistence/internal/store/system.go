package store

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// Rows of the SYSTEM stream's internal envelopes: the tool registry and the
// MCP servers. These rows change back and forth (a server connects,
// disconnects, connects again; a tool is disabled, enabled), so besides the
// usual "changes nothing when repeated" guard, every statement records the
// stream sequence of the last change it made to a row (an alicia_meta row
// alicia.applied_seq.<stream> on that row) and skips a row whose recorded
// sequence is not older: a replay of the whole stream then walks through no
// intermediate state and leaves every row, updated_at included, as it was.

// toolID and serverID are the ids of rows created from a name, the same on
// every replay.
func toolID(name string) string   { return derivedID("at", name) }
func serverID(name string) string { return derivedID("amcp", name) }

// toolRegistration upserts the tools a source offers and removes the ones of
// that source it no longer lists. The tools of an MCP server that is not
// configured (unknown or deleted) are not registered: they are removed.
func (w *writer) toolRegistration(b *protocol.ToolRegistration, at time.Time) (string, error) {
	var server *string
	switch {
	case b.Source == "builtin":
	case strings.HasPrefix(b.Source, "mcp:") && validServerName(strings.TrimPrefix(b.Source, "mcp:")):
		s := strings.TrimPrefix(b.Source, "mcp:")
		server = &s
	default:
		return "", fmt.Errorf("%w: %q", errToolSource, b.Source)
	}
	n := len(b.Tools)
	ids, names, descs, schemas := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
	seen := make(map[string]bool, n)
	for _, t := range b.Tools {
		if t.MCPServer != nil && (server == nil || *t.MCPServer != *server) {
			return "", fmt.Errorf("%w: %s in %s names %q", errToolServer, t.Name, b.Source, deref(t.MCPServer))
		}
		if seen[t.Name] {
			return "", fmt.Errorf("%w: %s", errDuplicateTool, t.Name)
		}
		seen[t.Name] = true
		schema := []byte("{}")
		if t.Parameters != nil {
			var err error
			if schema, err = json.Marshal(t.Parameters); err != nil {
				return "", fmt.Errorf("tool %s parameters are not representable as JSON: %w", t.Name, err)
			}
		}
		ids, names, descs, schemas = append(ids, toolID(t.Name)), append(names, t.Name), append(descs, deref(t.Description)), append(schemas, string(schema))
	}
	w.q(`WITH ch AS (
			INSERT INTO alicia_tools AS t (id, name, description, schema, mcp_server_id, created_at, updated_at)
			SELECT x.id, x.n, x.d, x.s::jsonb, s.id, $6, $6
			FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS x(id, n, d, s)
			LEFT JOIN alicia_mcp_servers s ON s.name = $5::text AND s.deleted_at IS NULL
			WHERE $5::text IS NULL OR s.id IS NOT NULL
			ON CONFLICT (name) DO UPDATE SET description = EXCLUDED.description, schema = EXCLUDED.schema,
				mcp_server_id = EXCLUDED.mcp_server_id, deleted_at = NULL
			WHERE (t.description, t.schema, t.mcp_server_id, t.deleted_at)
				IS DISTINCT FROM (EXCLUDED.description, EXCLUDED.schema, EXCLUDED.mcp_server_id, NULL::timestamptz)
			AND NOT EXISTS (SELECT 1 FROM alicia_meta v WHERE v.ref = t.id AND v.key = 'alicia.applied_seq.' || $7::text AND v.value::bigint >= $8::bigint)
			RETURNING t.id
		)
		INSERT INTO alicia_meta (id, ref, key, value)
		SELECT 'amt_seq_' || $7::text || '_' || ch.id, ch.id, 'alicia.applied_seq.' || $7::text, $8::bigint::text FROM ch
		ON CONFLICT (ref, key) DO UPDATE SET value = GREATEST(alicia_meta.value::bigint, EXCLUDED.value::bigint)::text, deleted_at = NULL`,
		ids, names, descs, schemas, server, at, w.stream, int64(w.seq))
	w.q(`WITH ch AS (
			UPDATE alicia_tools t SET deleted_at = $3 WHERE t.deleted_at IS NULL
			AND CASE WHEN $2::text IS NULL THEN t.mcp_server_id IS NULL AND t.name <> ALL($1::text[])
				ELSE t.mcp_server_id IN (SELECT id FROM alicia_mcp_servers WHERE name = $2::text)
					AND (t.name <> ALL($1::text[]) OR NOT EXISTS (SELECT 1 FROM alicia_mcp_servers WHERE name = $2::text AND deleted_at IS NULL))
				END
			AND NOT EXISTS (SELECT 1 FROM alicia_meta v WHERE v.ref = t.id AND v.key = 'alicia.applied_seq.' || $4::text AND v.value::bigint >= $5::bigint)
			RETURNING t.id
		)
		INSERT INTO alicia_meta (id, ref, key, value)
		SELECT 'amt_seq_' || $4::text || '_' || ch.id, ch.id, 'alicia.applied_seq.' || $4::text, $5::bigint::text FROM ch
		ON CONFLICT (ref, key) DO UPDATE SET value = GREATEST(alicia_meta.value::bigint, EXCLUDED.value::bigint)::text, deleted_at = NULL`,
		names, server, at, w.stream, int64(w.seq))
	if server != nil {
		return serverID(*server), nil
	}
	return "", nil
}

// toolSetting enables or disables a tool; a tool not registered (yet) is left alone.
func (w *writer) toolSetting(b *protocol.ToolSetting) string {
	w.q(`WITH ch AS (
			UPDATE alicia_tools t SET enabled = $2 WHERE t.name = $1 AND t.enabled <> $2
			AND NOT EXISTS (SELECT 1 FROM alicia_meta v WHERE v.ref = t.id AND v.key = 'alicia.applied_seq.' || $3::text AND v.value::bigint >= $4::bigint)
			RETURNING t.id
		)
		INSERT INTO alicia_meta (id, ref, key, value)
		SELECT 'amt_seq_' || $3::text || '_' || ch.id, ch.id, 'alicia.applied_seq.' || $3::text, $4::bigint::text FROM ch
		ON CONFLICT (ref, key) DO UPDATE SET value = GREATEST(alicia_meta.value::bigint, EXCLUDED.value::bigint)::text, deleted_at = NULL`,
		b.Name, b.Enabled, w.stream, int64(w.seq))
	return toolID(b.Name)
}

// mcpServerConfig upserts a server by name (reviving a deleted one, whose
// status starts over as unknown) or soft-deletes it with its tools.
func (w *writer) mcpServerConfig(b *protocol.MCPServerConfig, at time.Time) (string, error) {
	if !validServerName(b.Name) {
		return "", fmt.Errorf("%w: %q", errServerName, b.Name)
	}
	switch b.Action {
	case protocol.MCPServerConfigActionDelete:
		w.q(`WITH ch AS (
				UPDATE alicia_tools t SET deleted_at = $2 WHERE t.deleted_at IS NULL
				AND t.mcp_server_id IN (SELECT id FROM alicia_mcp_servers WHERE name = $1)
				AND NOT EXISTS (SELECT 1 FROM alicia_meta v WHERE v.ref = t.id AND v.key = 'alicia.applied_seq.' || $3::text AND v.value::bigint >= $4::bigint)
				RETURNING t.id
			), sv AS (
				UPDATE alicia_mcp_servers s SET deleted_at = $2 WHERE s.name = $1 AND s.deleted_at IS NULL
				AND NOT EXISTS (SELECT 1 FROM alicia_meta v WHERE v.ref = s.id AND v.key = 'alicia.applied_seq.' || $3::text AND v.value::bigint >= $4::bigint)
				RETURNING s.id
			)
			INSERT INTO alicia_meta (id, ref, key, value)
			SELECT 'amt_seq_' || $3::text || '_' || x.id, x.id, 'alicia.applied_seq.' || $3::text, $4::bigint::text
			FROM (SELECT id FROM ch UNION ALL SELECT id FROM sv) x
			ON CONFLICT (ref, key) DO UPDATE SET value = GREATEST(alicia_meta.value::bigint, EXCLUDED.value::bigint)::text, deleted_at = NULL`,
			b.Name, at, w.stream, int64(w.seq))
	case protocol.MCPServerConfigActionUpsert:
		var command, url *string
		switch {
		case b.Transport == nil:
			return "", fmt.Errorf("%w: %s has no transport", errServerTransport, b.Name)
		case *b.Transport == protocol.MCPServerConfigTransportStdio && deref(b.Command) != "":
			command = b.Command
		case *b.Transport == protocol.MCPServerConfigTransportHttp && deref(b.Url) != "":
			url = b.Url
		default:
			return "", fmt.Errorf("%w: %s over %s needs a command (stdio) or a url (http)", errServerTransport, b.Name, *b.Transport)
		}
		args := b.Args
		if args == nil {
			args = []string{}
		}
		env := map[string]string(b.Env)
		if env == nil {
			env = map[string]string{}
		}
		envJSON, _ := json.Marshal(env)
		w.q(`WITH ch AS (
				INSERT INTO alicia_mcp_servers AS s (id, name, transport, command, args, url, env, enabled, created_at, updated_at)
				VALUES ($1, $2, $3::mcp_transport, $4, $5, $6, $7::jsonb, COALESCE($8, true), $9, $9)
				ON CONFLICT (name) DO UPDATE SET transport = EXCLUDED.transport, command = EXCLUDED.command, args = EXCLUDED.args,
					url = EXCLUDED.url, env = EXCLUDED.env,
					enabled = COALESCE($8, CASE WHEN s.deleted_at IS NULL THEN s.enabled ELSE true END),
					status = CASE WHEN s.deleted_at IS NULL THEN s.status ELSE 'unknown' END,
					last_error = CASE WHEN s.deleted_at IS NULL THEN s.last_error END,
					deleted_at = NULL
				WHERE (s.transport, s.command, s.args, s.url, s.env, s.enabled, s.deleted_at) IS DISTINCT FROM
					(EXCLUDED.transport, EXCLUDED.command, EXCLUDED.args, EXCLUDED.url, EXCLUDED.env, COALESCE($8, s.enabled), NULL::timestamptz)
				AND NOT EXISTS (SELECT 1 FROM alicia_meta v WHERE v.ref = s.id AND v.key = 'alicia.applied_seq.' || $10::text AND v.value::bigint >= $11::bigint)
				RETURNING s.id
			)
			INSERT INTO alicia_meta (id, ref, key, value)
			SELECT 'amt_seq_' || $10::text || '_' || ch.id, ch.id, 'alicia.applied_seq.' || $10::text, $11::bigint::text FROM ch
			ON CONFLICT (ref, key) DO UPDATE SET value = GREATEST(alicia_meta.value::bigint, EXCLUDED.value::bigint)::text, deleted_at = NULL`,
			serverID(b.Name), b.Name, string(*b.Transport), command, args, url, string(envJSON), b.Enabled, at, w.stream, int64(w.seq))
	default:
		return "", fmt.Errorf("%w: %q", errUnknownServerAction, b.Action)
	}
	return serverID(b.Name), nil
}

// mcpServerStatus records a server's connection state and last error.
func (w *writer) mcpServerStatus(b *protocol.MCPServerStatus) string {
	w.q(`WITH ch AS (
			UPDATE alicia_mcp_servers s SET status = $2::mcp_server_status, last_error = $3
			WHERE s.name = $1 AND (s.status, s.last_error) IS DISTINCT FROM ($2::mcp_server_status, $3::text)
			AND NOT EXISTS (SELECT 1 FROM alicia_meta v WHERE v.ref = s.id AND v.key = 'alicia.applied_seq.' || $4::text AND v.value::bigint >= $5::bigint)
			RETURNING s.id
		)
		INSERT INTO alicia_meta (id, ref, key, value)
		SELECT 'amt_seq_' || $4::text || '_' || ch.id, ch.id, 'alicia.applied_seq.' || $4::text, $5::bigint::text FROM ch
		ON CONFLICT (ref, key) DO UPDATE SET value = GREATEST(alicia_meta.value::bigint, EXCLUDED.value::bigint)::text, deleted_at = NULL`,
		b.Name, string(b.Status), b.LastError, w.stream, int64(w.seq))
	return serverID(b.Name)
}

// validServerName: letters, digits, - and _ (it becomes part of tool names).
func validServerName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
