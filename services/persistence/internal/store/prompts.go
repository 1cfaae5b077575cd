package store

import (
	"fmt"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// promptVersion writes a PromptVersion (migrations 00012): the first
// envelope of an id creates the row; a later one changes only its status
// and rollout share. A version number of the component's scope already
// taken by another id keeps that id's row (two llm replicas configured
// with different seed texts: the first one applied wins).
//
// Rollout: an active version with no rollout share (or 1) is its scope's
// version of the component, and activating it retires every other active
// version of that component and scope; an active version with a share
// below 1 is rolling out beside it, and activating it retires only the
// other versions rolling out there. The statements run in stream order
// within the batch's transaction, so a replay of the stream ends in the
// same rows.
func (w *writer) promptVersion(b *protocol.PromptVersion, at time.Time) (string, error) {
	if b.Component == "" || (!strings.HasPrefix(b.Component, "tool:") && !validComponent[b.Component]) {
		return "", fmt.Errorf("%w: component %q", errPromptVersion, b.Component)
	}
	if b.RolloutShare != nil && (*b.RolloutShare < 0 || *b.RolloutShare > 1) {
		return "", fmt.Errorf("%w: rollout share %g outside 0..1", errPromptVersion, *b.RolloutShare)
	}
	created := time.UnixMilli(b.CreatedAt).UTC()
	if b.CreatedAt <= 0 {
		created = at
	}
	status := string(b.Status)
	w.q(`INSERT INTO alicia_prompt_versions (id, component, version, text, parent_id, user_id, status, rollout_share, created_by, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT DO NOTHING`,
		b.ID, b.Component, b.Version, b.Text, b.ParentID, b.UserID, status, b.RolloutShare, b.CreatedBy, created, at)
	w.q(`UPDATE alicia_prompt_versions SET status = $2, rollout_share = $3, updated_at = $4
		WHERE id = $1 AND (status, rollout_share) IS DISTINCT FROM ($2::text, $3::real)`, b.ID, status, b.RolloutShare, at)
	if b.Status == protocol.PromptVersionStatusActive {
		w.q(`UPDATE alicia_prompt_versions o SET status = 'retired', updated_at = $2
			FROM alicia_prompt_versions n
			WHERE n.id = $1 AND n.status = 'active' AND o.id <> n.id AND o.status = 'active'
			AND o.component = n.component AND o.user_id IS NOT DISTINCT FROM n.user_id
			AND (COALESCE(n.rollout_share, 1) >= 1 OR COALESCE(o.rollout_share, 1) < 1)`, b.ID, at)
	}
	return b.ID, nil
}

var validComponent = map[string]bool{"system": true, "voice_style": true, "memory_extraction": true, "demonstrations": true}
