package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/alicia-voice/alicia/pkg/promptver"
)

// PromptVersion is a stored version of a prompt component.
type PromptVersion struct {
	promptver.Version
	Component string
	Number    int32
	UserID    string // "": installation-wide
	Status    string
}

// ActivePromptVersions returns the active versions of component that may
// serve user: theirs and the installation's.
func (s *Store) ActivePromptVersions(ctx context.Context, component, user string) (mine, installation []promptver.Version, err error) {
	rows, err := s.pool.Query(ctx, `SELECT id, text, COALESCE(rollout_share, 1)::float8, COALESCE(user_id, '')
		FROM alicia_prompt_versions WHERE component = $1 AND status = 'active' AND (user_id IS NULL OR user_id = $2)
		ORDER BY version`, component, user)
	if err != nil {
		return nil, nil, fmt.Errorf("store: prompt versions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var v promptver.Version
		var owner string
		if err := rows.Scan(&v.ID, &v.Text, &v.Share, &owner); err != nil {
			return nil, nil, fmt.Errorf("store: prompt versions: %w", err)
		}
		if owner == "" {
			installation = append(installation, v)
		} else {
			mine = append(mine, v)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("store: prompt versions: %w", err)
	}
	return mine, installation, nil
}

// InstallationPromptVersions are the installation-wide versions of
// component, every status.
func (s *Store) InstallationPromptVersions(ctx context.Context, component string) ([]PromptVersion, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, text, COALESCE(rollout_share, 1)::float8, component, version, status
		FROM alicia_prompt_versions WHERE component = $1 AND user_id IS NULL ORDER BY version`, component)
	if err != nil {
		return nil, fmt.Errorf("store: installation prompt versions: %w", err)
	}
	vs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (PromptVersion, error) {
		var v PromptVersion
		err := row.Scan(&v.ID, &v.Text, &v.Share, &v.Component, &v.Number, &v.Status)
		return v, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: installation prompt versions: %w", err)
	}
	return vs, nil
}
