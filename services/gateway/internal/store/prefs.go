package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/alicia-voice/alicia/pkg/prefs"
	"github.com/alicia-voice/alicia/pkg/protocol"
)

// ConversationPreferences returns what applies to conversation cid now: its own
// Configuration values over its owner's settings over d (pkg/prefs).
func (s *Store) ConversationPreferences(ctx context.Context, cid string, d prefs.Defaults) (prefs.Effective, error) {
	return prefs.Resolve(ctx, s.pool, cid, d)
}

// UserSettings returns a person's own settings (alicia_user_settings;
// every field nil until they set it).
func (s *Store) UserSettings(ctx context.Context, user string) (prefs.Layer, error) {
	return prefs.ReadPerson(ctx, s.pool, user)
}

// ConversationFeatures returns the client features the conversation's
// Configurations last named (alicia_conversations.preferences.features),
// nil when none did.
func (s *Store) ConversationFeatures(ctx context.Context, cid string) ([]protocol.ConfigurationFeaturesElem, error) {
	var fs []protocol.ConfigurationFeaturesElem
	err := s.pool.QueryRow(ctx, `SELECT CASE WHEN jsonb_typeof(preferences->'features') = 'array' THEN preferences->'features' END
		FROM alicia_conversations WHERE id = $1`, cid).Scan(&fs)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: features of %s: %w", cid, err)
	}
	return fs, nil
}
