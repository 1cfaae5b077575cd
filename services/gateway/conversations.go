package gateway

import (
	"context"
	"errors"

	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/services/gateway/internal/store"
)

// owners authorizes a WebSocket user for a conversation from the persisted
// owner, with the same rules as the REST API.
type owners struct{ st *store.Store }

func (o owners) Authorize(ctx context.Context, user, cid string) error {
	err := o.st.ConversationOwner(ctx, user, cid)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return edge.ErrNotFound
	case errors.Is(err, store.ErrForbidden):
		return edge.ErrForbidden
	}
	return err
}
