package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/llm/internal/prompts"
)

const versionColumns = `id, component, version, text, COALESCE(parent_id, ''), COALESCE(user_id, ''), status,
	COALESCE(rollout_share, 1)::float8, created_by, created_at, updated_at`

func scanVersion(row pgx.CollectableRow) (prompts.Version, error) {
	var v prompts.Version
	var status string
	err := row.Scan(&v.ID, &v.Component, &v.Version, &v.Text, &v.ParentID, &v.UserID, &status, &v.Share, &v.CreatedBy, &v.CreatedAt, &v.UpdatedAt)
	v.Status = protocol.PromptVersionStatus(status)
	return v, err
}

// ActivePromptVersions are the versions serving (status active), oldest
// version number first.
func (r *Reader) ActivePromptVersions(ctx context.Context) ([]prompts.Version, error) {
	rows, err := r.db.Query(ctx, `SELECT `+versionColumns+` FROM alicia_prompt_versions WHERE status = 'active' ORDER BY version, id`)
	if err != nil {
		return nil, fmt.Errorf("store: prompt versions: %w", err)
	}
	vs, err := pgx.CollectRows(rows, scanVersion)
	if err != nil {
		return nil, fmt.Errorf("store: prompt versions: %w", err)
	}
	return vs, nil
}

// InstallationPromptVersions are the installation-wide versions, every status.
func (r *Reader) InstallationPromptVersions(ctx context.Context) ([]prompts.Version, error) {
	rows, err := r.db.Query(ctx, `SELECT `+versionColumns+` FROM alicia_prompt_versions WHERE user_id IS NULL ORDER BY component, version`)
	if err != nil {
		return nil, fmt.Errorf("store: installation prompt versions: %w", err)
	}
	vs, err := pgx.CollectRows(rows, scanVersion)
	if err != nil {
		return nil, fmt.Errorf("store: installation prompt versions: %w", err)
	}
	return vs, nil
}

// PromptVersion reads version id.
func (r *Reader) PromptVersion(ctx context.Context, id string) (prompts.Version, error) {
	rows, err := r.db.Query(ctx, `SELECT `+versionColumns+` FROM alicia_prompt_versions WHERE id = $1`, id)
	if err != nil {
		return prompts.Version{}, fmt.Errorf("store: prompt version: %w", err)
	}
	v, err := pgx.CollectExactlyOneRow(rows, scanVersion)
	if errors.Is(err, pgx.ErrNoRows) {
		return v, fmt.Errorf("%w: %s", prompts.ErrNotFound, id)
	}
	if err != nil {
		return v, fmt.Errorf("store: prompt version: %w", err)
	}
	return v, nil
}

// ScopeVersions are the versions of component in scope user (""
// installation-wide), newest version first.
func (r *Reader) ScopeVersions(ctx context.Context, component, user string) ([]prompts.Version, error) {
	rows, err := r.db.Query(ctx, `SELECT `+versionColumns+` FROM alicia_prompt_versions
		WHERE component = $1 AND COALESCE(user_id, '') = $2 ORDER BY version DESC`, component, user)
	if err != nil {
		return nil, fmt.Errorf("store: scope versions: %w", err)
	}
	vs, err := pgx.CollectRows(rows, scanVersion)
	if err != nil {
		return nil, fmt.Errorf("store: scope versions: %w", err)
	}
	return vs, nil
}

// Votes counts, per version, the answers it shaped and the up and down
// votes on them (votes on the answer itself; a critical vote counts as
// down).
func (r *Reader) Votes(ctx context.Context, ids []string) (map[string]prompts.Tally, error) {
	rows, err := r.db.Query(ctx, `SELECT v.id,
			(SELECT count(*) FROM alicia_messages m WHERE m.prompt_versions @> ARRAY[v.id] AND m.deleted_at IS NULL),
			(SELECT count(*) FROM alicia_votes f JOIN alicia_messages m ON m.id = f.message_id
				WHERE m.prompt_versions @> ARRAY[v.id] AND m.deleted_at IS NULL AND f.deleted_at IS NULL
				AND f.target_type = 'message' AND f.target_id = m.id AND f.vote = 'up'),
			(SELECT count(*) FROM alicia_votes f JOIN alicia_messages m ON m.id = f.message_id
				WHERE m.prompt_versions @> ARRAY[v.id] AND m.deleted_at IS NULL AND f.deleted_at IS NULL
				AND f.target_type = 'message' AND f.target_id = m.id AND f.vote <> 'up')
		FROM unnest($1::text[]) AS v(id)`, ids)
	if err != nil {
		return nil, fmt.Errorf("store: votes by version: %w", err)
	}
	defer rows.Close()
	out := make(map[string]prompts.Tally, len(ids))
	for rows.Next() {
		var id string
		var t prompts.Tally
		if err := rows.Scan(&id, &t.Answers, &t.Up, &t.Down); err != nil {
			return nil, fmt.Errorf("store: votes by version: %w", err)
		}
		out[id] = t
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: votes by version: %w", err)
	}
	return out, nil
}
