package chatcmd

import (
	"errors"
	"fmt"

	"github.com/coder/websocket"
)

// ErrRevoked means the gateway closed the connection for good: the
// session or key was revoked, or the conversation was deleted. The chat
// ends with the gateway's reason instead of reconnecting.
var ErrRevoked = errors.New("chat: closed by the gateway")

// Close codes the gateway ends a connection with when reconnecting cannot
// help (services/gateway/internal/ws): signed out or key removed, refused,
// conversation deleted; 1008 is a policy violation (flooding).
var finalCloses = map[websocket.StatusCode]bool{4401: true, 4403: true, 4404: true, websocket.StatusPolicyViolation: true}

// revoked returns ErrRevoked with the reason when cause is a close that
// reconnecting cannot undo, or nil.
func revoked(cause error) error {
	var ce websocket.CloseError
	if !errors.As(cause, &ce) || !finalCloses[ce.Code] {
		return nil
	}
	reason := ce.Reason
	if reason == "" {
		reason = fmt.Sprintf("close code %d", ce.Code)
	}
	return fmt.Errorf("%w: %s", ErrRevoked, reason)
}
