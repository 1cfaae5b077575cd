package store

import (
	"fmt"
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// Everyday records (issue 30), both on system subjects:
//   - UserSettings (alicia.sys.user_settings): a person's defaults, the latest
//     by timestamp holding whole (alicia_user_settings); only the person may
//     set theirs (meta alicia.user_id, as for LearningConsent).
//   - Timer (alicia.sys.timer): a timer or reminder in its latest state
//     (alicia_timers); a fired or cancelled one never changes again and an
//     older state never overwrites a newer one, so a redelivered or replayed
//     envelope changes nothing.

func (w *writer) userSettings(env *protocol.Envelope, b *protocol.UserSettings, at time.Time) (string, error) {
	if b.UserID == "" || actingUser(env) != b.UserID {
		return "", fmt.Errorf("%w: settings of %q set by %q (meta %s): only the person may set theirs", errEveryday, b.UserID, actingUser(env), MetaUserID)
	}
	if b.SpeechSpeed != nil && (*b.SpeechSpeed < 0.5 || *b.SpeechSpeed > 2) {
		return "", fmt.Errorf("%w: settings of %q: speechSpeed %v is outside 0.5..2", errEveryday, b.UserID, *b.SpeechSpeed)
	}
	set := at
	if b.Timestamp > 0 {
		set = time.UnixMilli(b.Timestamp).UTC()
	}
	w.q(`INSERT INTO alicia_user_settings AS s (user_id, voice, speech_speed, language, time_zone, wake_word, set_at, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)
		ON CONFLICT (user_id) DO UPDATE SET voice = EXCLUDED.voice, speech_speed = EXCLUDED.speech_speed,
			language = EXCLUDED.language, time_zone = EXCLUDED.time_zone, wake_word = EXCLUDED.wake_word, set_at = EXCLUDED.set_at
		WHERE EXCLUDED.set_at >= s.set_at
			AND (s.voice, s.speech_speed, s.language, s.time_zone, s.wake_word, s.set_at)
				IS DISTINCT FROM (EXCLUDED.voice, EXCLUDED.speech_speed, EXCLUDED.language, EXCLUDED.time_zone, EXCLUDED.wake_word, EXCLUDED.set_at)`,
		b.UserID, nonEmpty(b.Voice), b.SpeechSpeed, nonEmpty(b.Language), nonEmpty(b.TimeZone), b.WakeWord, set, at)
	return "", nil
}

func (w *writer) timer(b *protocol.Timer, at time.Time) (string, error) {
	if b.ID == "" || b.UserID == "" || b.ConversationID == "" {
		return "", fmt.Errorf("%w: timer %q without an id, a user or a conversation", errEveryday, b.ID)
	}
	switch b.Kind {
	case protocol.TimerKindTimer, protocol.TimerKindReminder:
	default:
		return "", fmt.Errorf("%w: timer %s kind %q (use timer or reminder)", errEveryday, b.ID, b.Kind)
	}
	var firedAt, cancelledAt *time.Time
	state := time.UnixMilli(b.Timestamp).UTC()
	switch b.Status {
	case protocol.TimerStatusScheduled:
	case protocol.TimerStatusFired:
		firedAt = &state
	case protocol.TimerStatusCancelled:
		cancelledAt = &state
	default:
		return "", fmt.Errorf("%w: timer %s status %q (use scheduled, cancelled or fired)", errEveryday, b.ID, b.Status)
	}
	var delivered *string
	if b.DeliveredAs != nil {
		d := string(*b.DeliveredAs)
		delivered = &d
	}
	zone := "UTC"
	if b.TimeZone != nil && *b.TimeZone != "" {
		zone = *b.TimeZone
	}
	label := ""
	if b.Label != nil {
		label = *b.Label
	}
	w.q(`INSERT INTO alicia_timers AS t (id, user_id, conversation_id, kind, label, due_at, time_zone, status,
			delivered_as, message_id, state_at, fired_at, cancelled_at, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
		ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, delivered_as = EXCLUDED.delivered_as,
			message_id = EXCLUDED.message_id, state_at = EXCLUDED.state_at,
			fired_at = EXCLUDED.fired_at, cancelled_at = EXCLUDED.cancelled_at
		WHERE t.status = 'scheduled' AND EXCLUDED.status <> 'scheduled' AND EXCLUDED.state_at >= t.state_at`,
		b.ID, b.UserID, b.ConversationID, string(b.Kind), label, time.UnixMilli(b.DueAt).UTC(), zone, string(b.Status),
		delivered, b.MessageID, state, firedAt, cancelledAt, time.UnixMilli(b.CreatedAt).UTC(), at)
	return "", nil
}

// nonEmpty is s, or nil for an absent or empty string (a column left to the default).
func nonEmpty(s *string) *string {
	if s == nil || *s == "" {
		return nil
	}
	return s
}
