package promptver

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// Querier runs read queries; a *pgxpool.Pool fits.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Reader reads prompt versions (read-only: persistence writes them).
type Reader struct{ db Querier }

// NewReader returns a Reader on db.
func NewReader(db Querier) *Reader { return &Reader{db: db} }

const columns = `id, component, version, text, COALESCE(parent_id, ''), COALESCE(user_id, ''), status,
	COALESCE(rollout_share, 1)::float8, created_by, created_at, updated_at`

func scan(row pgx.CollectableRow) (Record, error) {
	var v Record
	var status string
	err := row.Scan(&v.ID, &v.Component, &v.Version, &v.Text, &v.ParentID, &v.UserID, &status, &v.Share, &v.CreatedBy, &v.CreatedAt, &v.UpdatedAt)
	v.Status = protocol.PromptVersionStatus(status)
	return v, err
}

func (r *Reader) list(ctx context.Context, what, sql string, args ...any) ([]Record, error) {
	rows, err := r.db.Query(ctx, `SELECT `+columns+` FROM alicia_prompt_versions `+sql, args...)
	if err != nil {
		return nil, fmt.Errorf("promptver: %s: %w", what, err)
	}
	vs, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("promptver: %s: %w", what, err)
	}
	return vs, nil
}

// Active are the versions serving (status active), oldest version number first.
func (r *Reader) Active(ctx context.Context) ([]Record, error) {
	return r.list(ctx, "active versions", `WHERE status = 'active' ORDER BY version, id`)
}

// Installation are the installation-wide versions, every status.
func (r *Reader) Installation(ctx context.Context) ([]Record, error) {
	return r.list(ctx, "installation versions", `WHERE user_id IS NULL ORDER BY component, version`)
}

// Get reads version id (ErrNotFound).
func (r *Reader) Get(ctx context.Context, id string) (Record, error) {
	vs, err := r.list(ctx, "version", `WHERE id = $1`, id)
	if err != nil {
		return Record{}, err
	}
	if len(vs) == 0 {
		return Record{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return vs[0], nil
}

// Scope are the versions of component in scope user ("":
// installation-wide), newest version first.
func (r *Reader) Scope(ctx context.Context, component, user string) ([]Record, error) {
	return r.list(ctx, "scope versions", `WHERE component = $1 AND COALESCE(user_id, '') = $2 ORDER BY version DESC`, component, user)
}

// Votes counts, per version, the answers it shaped, the up and down votes
// on them (votes on the answer itself; critical counts as down) and their
// judged scores (the judge's, where it sampled them).
func (r *Reader) Votes(ctx context.Context, ids []string) (map[string]Tally, error) {
	rows, err := r.db.Query(ctx, `SELECT v.id,
			(SELECT count(*) FROM alicia_messages m WHERE m.prompt_versions @> ARRAY[v.id] AND m.deleted_at IS NULL),
			(SELECT count(*) FILTER (WHERE f.vote = 'up') FROM alicia_votes f JOIN alicia_messages m ON m.id = f.message_id
				WHERE m.prompt_versions @> ARRAY[v.id] AND m.deleted_at IS NULL AND f.deleted_at IS NULL
				AND f.target_type = 'message' AND f.target_id = m.id),
			(SELECT count(*) FILTER (WHERE f.vote <> 'up') FROM alicia_votes f JOIN alicia_messages m ON m.id = f.message_id
				WHERE m.prompt_versions @> ARRAY[v.id] AND m.deleted_at IS NULL AND f.deleted_at IS NULL
				AND f.target_type = 'message' AND f.target_id = m.id),
			jv.n, jv.c, jv.cs, jv.f, jv.fs, jv.r, jv.rs
		FROM unnest($1::text[]) AS v(id)
		CROSS JOIN LATERAL (SELECT count(*) AS n,
				avg(j.correctness)::float8 AS c, stddev_samp(j.correctness)::float8 AS cs,
				avg(j.faithfulness)::float8 AS f, stddev_samp(j.faithfulness)::float8 AS fs,
				avg(j.relevancy)::float8 AS r, stddev_samp(j.relevancy)::float8 AS rs
			FROM alicia_message_judgements j
			JOIN alicia_messages m ON m.id = j.message_id AND m.conversation_id = j.conversation_id
			WHERE m.prompt_versions @> ARRAY[v.id] AND m.deleted_at IS NULL) jv`, ids)
	if err != nil {
		return nil, fmt.Errorf("promptver: votes by version: %w", err)
	}
	defer rows.Close()
	out := make(map[string]Tally, len(ids))
	for rows.Next() {
		var id string
		var t Tally
		var means, sds [3]*float64
		if err := rows.Scan(&id, &t.Answers, &t.Up, &t.Down, &t.Judged.N,
			&means[0], &sds[0], &means[1], &sds[1], &means[2], &sds[2]); err != nil {
			return nil, fmt.Errorf("promptver: votes by version: %w", err)
		}
		for i, dst := range []*Score{&t.Judged.Correctness, &t.Judged.Faithfulness, &t.Judged.Relevancy} {
			if means[i] != nil {
				dst.Mean = *means[i]
			}
			if sds[i] != nil {
				dst.SD = *sds[i]
			}
		}
		out[id] = t
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("promptver: votes by version: %w", err)
	}
	return out, nil
}
