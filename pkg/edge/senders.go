package edge

import (
	"fmt"
	"strings"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// refuse says why a client may not send env, or "" when it may. A client
// speaks only as a client: the types whose schema lists "client" among its
// senders (x-alicia-senders), and of a SyncRequest only the user's own
// messages (an offline client has no assistant answers to upload).
func refuse(env *protocol.Envelope) string {
	if !env.Type.ClientMaySend() {
		return fmt.Sprintf("a client may not send %s", env.Type)
	}
	// Not tied to a conversation: the gateway's REST API takes them, with
	// the checks of their scope (services/gateway/API.md, "Prompt
	// optimisation").
	switch env.Type {
	case protocol.TypeDimensionPreference:
		return "DimensionPreference is not sent on a conversation: PUT /v1/optimize/preferences sets it"
	case protocol.TypeEliteSelect:
		return "EliteSelect is not sent on a conversation: POST /v1/optimize/runs/{id}/select promotes an elite"
	}
	if b, ok := env.Body.(*protocol.SyncRequest); ok {
		for i, m := range b.Messages {
			if m.Role != "user" {
				return fmt.Sprintf("a client may not sync messages of role %s (messages[%d])", m.Role, i)
			}
		}
	}
	return ""
}

// metaReserved prefixes the meta keys only services set (alicia.user_id,
// alicia.utterance_id, …): a client's values are dropped, never trusted.
const metaReserved = "alicia."

// clientMeta copies a client's meta without the reserved keys and with the
// authenticated user.
func clientMeta(in map[string]any, user string) map[string]any {
	meta := make(map[string]any, len(in)+1)
	for k, v := range in {
		if !strings.HasPrefix(k, metaReserved) {
			meta[k] = v
		}
	}
	meta[MetaUserID] = user
	return meta
}
