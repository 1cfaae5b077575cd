// Package voices tells server-info which voices the speech engine offers
// and which languages the speech and transcription engines take, so the
// web client's voice and language choices are the installation's. The
// speech engine is asked (speaches' GET /v1/audio/speech/voices, or
// espeak-ng --voices) at most once per TTL; an engine that lists none
// offers its configured voice alone.
package voices

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/engines"
)

// Defaults for a Catalog.
const (
	DefaultTTL = 5 * time.Minute
	// failedTTL: a speech engine that did not list its voices is asked
	// again this soon (it may be loading).
	failedTTL = 30 * time.Second
	timeout   = 3 * time.Second
)

// Catalog lists the voices of one speech engine and the languages of it
// and of the transcription engine. Safe for concurrent use.
type Catalog struct {
	tts, asr engines.Engine
	client   *http.Client
	ttl      time.Duration
	log      zerolog.Logger

	mu     sync.Mutex
	voices []engines.Voice
	at     time.Time
	ok     bool
}

// New returns a catalog of tts's voices (client nil: http.DefaultClient).
func New(tts, asr engines.Engine, client *http.Client, log zerolog.Logger) *Catalog {
	return &Catalog{tts: tts, asr: asr, client: client, ttl: DefaultTTL, log: log}
}

// Voices returns the speech engine's voices, the configured one first.
func (c *Catalog) Voices(ctx context.Context) []engines.Voice {
	c.mu.Lock()
	defer c.mu.Unlock()
	age := time.Since(c.at)
	if c.at.IsZero() || (c.ok && age >= c.ttl) || (!c.ok && age >= failedTTL) {
		vs, err := engines.Voices(ctx, c.client, c.tts, timeout)
		if err != nil {
			c.log.Debug().Err(err).Msg("the speech engine lists no voices; offering its configured voice")
		}
		c.voices, c.ok, c.at = withConfigured(vs, c.tts.Voice), err == nil, time.Now()
	}
	return slices.Clone(c.voices)
}

// withConfigured puts the configured voice first, adding it when the
// engine did not list it.
func withConfigured(vs []engines.Voice, configured string) []engines.Voice {
	if configured == "" {
		return vs
	}
	i := slices.IndexFunc(vs, func(v engines.Voice) bool { return v.ID == configured })
	if i < 0 {
		return append([]engines.Voice{{ID: configured}}, vs...)
	}
	out := append([]engines.Voice{vs[i]}, vs[:i]...)
	return append(out, vs[i+1:]...)
}

// Has reports whether id is one of the speech engine's voices.
func (c *Catalog) Has(ctx context.Context, id string) bool {
	return slices.ContainsFunc(c.Voices(ctx), func(v engines.Voice) bool { return v.ID == id })
}

// SpeechLanguages are the languages of the speech engine's voices.
func (c *Catalog) SpeechLanguages(ctx context.Context) []string {
	var out []string
	for _, v := range c.Voices(ctx) {
		if v.Language != "" && !slices.Contains(out, v.Language) {
			out = append(out, v.Language)
		}
	}
	slices.Sort(out)
	return out
}

// TranscriptionLanguages are the languages a Whisper model transcribes
// (its language codes), or none for another model.
func (c *Catalog) TranscriptionLanguages() []string {
	if !strings.Contains(strings.ToLower(c.asr.Model), "whisper") {
		return nil
	}
	return slices.Clone(whisperLanguages)
}

// whisperLanguages are the codes Whisper large-v3 takes as its language.
var whisperLanguages = []string{
	"af", "am", "ar", "as", "az", "ba", "be", "bg", "bn", "bo", "br", "bs", "ca", "cs", "cy", "da", "de", "el",
	"en", "es", "et", "eu", "fa", "fi", "fo", "fr", "gl", "gu", "ha", "haw", "he", "hi", "hr", "ht", "hu", "hy",
	"id", "is", "it", "ja", "jw", "ka", "kk", "km", "kn", "ko", "la", "lb", "ln", "lo", "lt", "lv", "mg", "mi",
	"mk", "ml", "mn", "mr", "ms", "mt", "my", "ne", "nl", "nn", "no", "oc", "pa", "pl", "ps", "pt", "ro", "ru",
	"sa", "sd", "si", "sk", "sl", "sn", "so", "sq", "sr", "su", "sv", "sw", "ta", "te", "tg", "th", "tk", "tl",
	"tr", "tt", "uk", "ur", "uz", "vi", "yi", "yo", "yue", "zh",
}
