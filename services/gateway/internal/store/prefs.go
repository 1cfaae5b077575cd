package store

import (
	"context"

	"github.com/alicia-voice/alicia/pkg/prefs"
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
