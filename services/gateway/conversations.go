package gateway

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alicia-voice/alicia/pkg/edge"
)

// owners authorizes a user for a conversation from the persisted owner.
type owners struct{ pool *pgxpool.Pool }

func (o owners) Authorize(ctx context.Context, user, cid string) error {
	var owner *string
	err := o.pool.QueryRow(ctx, `SELECT user_id FROM alicia_conversations WHERE id = $1 AND deleted_at IS NULL`, cid).Scan(&owner)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return edge.ErrNotFound
	case err != nil:
		return fmt.Errorf("gateway: conversation owner: %w", err)
	case owner == nil || *owner != user:
		return edge.ErrForbidden
	}
	return nil
}
