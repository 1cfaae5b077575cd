package worker

import (
	"context"
	"time"

	"github.com/alicia-voice/alicia/pkg/prefs"
)

// prefsTimeout bounds reading a conversation's preferences (a cache miss).
const prefsTimeout = 2 * time.Second

// applyLanguage sets the job's language to its conversation's, or its
// owner's (pkg/prefs), as a Whisper language code (pt-BR → pt): the
// transcription request then names it instead of leaving it to detection
// or to the installation's hint the job carries (ALICIA_ASR_LANGUAGE).
// It is read when the job is taken, so a change applies from the next
// utterance.
func (w *Worker) applyLanguage(ctx context.Context, j *job) {
	if w.d.Prefs == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, prefsTimeout)
	defer cancel()
	eff, err := w.d.Prefs.Get(ctx, j.cid)
	if err != nil {
		w.d.Log.Warn().Err(err).Str("conversation_id", j.cid).Msg("preferences not read; transcribing with what is known")
	}
	if eff.LanguageFrom == prefs.FromInstallation {
		return
	}
	if lang := prefs.BaseLanguage(eff.Language); lang != "" {
		j.body.Language = &lang
	}
}
