package edge

import (
	"strings"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// invalidBody says what is wrong with a client envelope the schema lets
// through but no service could use, or "" when nothing is.
func invalidBody(env *protocol.Envelope) string {
	if b, ok := env.Body.(*protocol.Commentary); ok {
		switch {
		case strings.TrimSpace(b.Content) == "":
			return "a Commentary needs content"
		case b.ID == "" || b.MessageID == "":
			return "a Commentary needs an id and a messageId (for a comment on the whole conversation: any message of it, with commentaryType conversation)"
		}
	}
	return ""
}
