package edge

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/protocol"
)

// Budgets bound what one user may send and keep, in bytes and in work,
// beside the envelope rates of Limits. Each has a name (the one an
// ErrorMessage over it gives), a variable and a default a household or a
// small team never reaches (BudgetTable). A zero field takes its default; -1
// turns a byte or count budget off.
type Budgets struct {
	// AudioBytesPerSecond and AudioBurstBytes: client audio (AudioChunk
	// data) per second per user over the process's connections. Speech is
	// 32 KB/s as 16 kHz PCM, 96 KB/s as 48 kHz PCM, a few KB/s as Opus.
	AudioBytesPerSecond, AudioBurstBytes int64
	// AudioBytesPerDay: input audio a user stores per UTC day, over every
	// replica (read from the database, plus what this process took since).
	AudioBytesPerDay int64
	// StoredBytes: what a user's conversations and memories hold.
	StoredBytes int64
	// MessageChars, NoteChars, MemoryChars: the longest text of a message
	// (a UserMessage, a synced message, an edit), a note or vote note, and
	// a memory, in characters. The REST API takes the same.
	MessageChars, NoteChars, MemoryChars int
	// EnvelopeBytes: the largest client envelope other than audio.
	EnvelopeBytes int64
	// ConversationsPerHour: conversations a user creates in any hour.
	ConversationsPerHour int
	// UsageRefresh: how often a user's stored and daily usage is read
	// again from the database while the user is active.
	UsageRefresh time.Duration
}

// Budget names, as ErrorMessages and the documentation give them.
const (
	BudgetAudioRate     = "audio_bytes_per_second"
	BudgetAudioDay      = "audio_bytes_per_day"
	BudgetStored        = "stored_bytes"
	BudgetMessage       = "message_chars"
	BudgetNote          = "note_chars"
	BudgetMemory        = "memory_chars"
	BudgetEnvelope      = "envelope_bytes"
	BudgetConversations = "conversations_per_hour"
)

// DefaultBudgets are the defaults of Budgets.
func DefaultBudgets() Budgets {
	return Budgets{
		AudioBytesPerSecond: 256 << 10, AudioBurstBytes: 2 << 20,
		AudioBytesPerDay: 2 << 30, StoredBytes: 20 << 30,
		MessageChars: 32000, NoteChars: 4000, MemoryChars: 4000,
		EnvelopeBytes: 256 << 10, ConversationsPerHour: 120,
		UsageRefresh: 15 * time.Second,
	}
}

// BudgetRow is one budget of the documentation's table.
type BudgetRow struct {
	Name, Variable, Default, Scope string
}

// BudgetTable lists every budget with its variable and default (the
// gateway's README prints it; a test checks the two agree).
func BudgetTable() []BudgetRow {
	return []BudgetRow{
		{BudgetAudioRate, "ALICIA_BUDGET_AUDIO_BYTES_PER_SECOND", "256KiB", "client audio per second per user, over the user's connections to one edge process"},
		{"(burst)", "ALICIA_BUDGET_AUDIO_BURST", "2MiB", "audio a user may send at once before the rate applies"},
		{BudgetAudioDay, "ALICIA_BUDGET_AUDIO_BYTES_PER_DAY", "2GiB", "input audio stored per user per UTC day, over every replica"},
		{BudgetStored, "ALICIA_BUDGET_STORED_BYTES", "20GiB", "what a user's conversations (texts, audio) and memories hold; deleting frees it"},
		{BudgetMessage, "ALICIA_BUDGET_MESSAGE_CHARS", "32000", "the longest message a user sends (UserMessage, synced message, edit)"},
		{BudgetNote, "ALICIA_BUDGET_NOTE_CHARS", "4000", "the longest note (UserNote, a vote's note)"},
		{BudgetMemory, "ALICIA_BUDGET_MEMORY_CHARS", "4000", "the longest memory"},
		{BudgetEnvelope, "ALICIA_BUDGET_ENVELOPE_BYTES", "256KiB", "the largest client envelope other than AudioChunk"},
		{BudgetConversations, "ALICIA_BUDGET_CONVERSATIONS_PER_HOUR", "120", "conversations a user creates in any hour, over every replica"},
		{"(refresh)", "ALICIA_BUDGET_USAGE_REFRESH", "15s", "how often an active user's stored and daily usage is read from the database"},
	}
}

// From overrides b from the ALICIA_BUDGET_* variables of src.
func (b *Budgets) From(src config.Source) error {
	return errors.Join(
		src.Bytes("ALICIA_BUDGET_AUDIO_BYTES_PER_SECOND", &b.AudioBytesPerSecond),
		src.Bytes("ALICIA_BUDGET_AUDIO_BURST", &b.AudioBurstBytes),
		src.Bytes("ALICIA_BUDGET_AUDIO_BYTES_PER_DAY", &b.AudioBytesPerDay),
		src.Bytes("ALICIA_BUDGET_STORED_BYTES", &b.StoredBytes),
		src.Int("ALICIA_BUDGET_MESSAGE_CHARS", &b.MessageChars),
		src.Int("ALICIA_BUDGET_NOTE_CHARS", &b.NoteChars),
		src.Int("ALICIA_BUDGET_MEMORY_CHARS", &b.MemoryChars),
		src.Bytes("ALICIA_BUDGET_ENVELOPE_BYTES", &b.EnvelopeBytes),
		src.Int("ALICIA_BUDGET_CONVERSATIONS_PER_HOUR", &b.ConversationsPerHour),
		src.Duration("ALICIA_BUDGET_USAGE_REFRESH", &b.UsageRefresh),
	)
}

// Validate reports budgets that refuse everything (zero fields take their
// defaults).
func (b Budgets) Validate() error {
	b = b.WithDefaults()
	var errs []error
	if b.AudioBytesPerSecond == 0 || b.AudioBytesPerSecond < -1 || b.AudioBurstBytes < 0 ||
		(b.AudioBytesPerSecond > 0 && b.AudioBurstBytes > 0 && b.AudioBurstBytes < 64<<10) {
		errs = append(errs, fmt.Errorf("ALICIA_BUDGET_AUDIO_BYTES_PER_SECOND %d / _AUDIO_BURST %d: want a rate > 0 (or -1: none) and a burst ≥ 64KiB",
			b.AudioBytesPerSecond, b.AudioBurstBytes))
	}
	for _, v := range []struct {
		name string
		n    int64
	}{{"ALICIA_BUDGET_AUDIO_BYTES_PER_DAY", b.AudioBytesPerDay}, {"ALICIA_BUDGET_STORED_BYTES", b.StoredBytes},
		{"ALICIA_BUDGET_MESSAGE_CHARS", int64(b.MessageChars)}, {"ALICIA_BUDGET_NOTE_CHARS", int64(b.NoteChars)},
		{"ALICIA_BUDGET_MEMORY_CHARS", int64(b.MemoryChars)}, {"ALICIA_BUDGET_CONVERSATIONS_PER_HOUR", int64(b.ConversationsPerHour)}} {
		if v.n == 0 || v.n < -1 {
			errs = append(errs, fmt.Errorf("%s %d: want > 0, or -1 for none", v.name, v.n))
		}
	}
	if b.EnvelopeBytes < 1024 && b.EnvelopeBytes != -1 {
		errs = append(errs, fmt.Errorf("ALICIA_BUDGET_ENVELOPE_BYTES %d: want ≥ 1KiB, or -1 for the protocol's 1 MiB", b.EnvelopeBytes))
	}
	if b.UsageRefresh < time.Second {
		errs = append(errs, fmt.Errorf("ALICIA_BUDGET_USAGE_REFRESH %s: want ≥ 1s", b.UsageRefresh))
	}
	return errors.Join(errs...)
}

// WithDefaults fills the zero fields.
func (b Budgets) WithDefaults() Budgets {
	d := DefaultBudgets()
	fill := func(v *int64, def int64) {
		if *v == 0 {
			*v = def
		}
	}
	fill(&b.AudioBytesPerSecond, d.AudioBytesPerSecond)
	fill(&b.AudioBurstBytes, d.AudioBurstBytes)
	fill(&b.AudioBytesPerDay, d.AudioBytesPerDay)
	fill(&b.StoredBytes, d.StoredBytes)
	fill(&b.EnvelopeBytes, d.EnvelopeBytes)
	fillInt := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	fillInt(&b.MessageChars, d.MessageChars)
	fillInt(&b.NoteChars, d.NoteChars)
	fillInt(&b.MemoryChars, d.MemoryChars)
	fillInt(&b.ConversationsPerHour, d.ConversationsPerHour)
	if b.UsageRefresh <= 0 {
		b.UsageRefresh = d.UsageRefresh
	}
	return b
}

// Off reports whether every budget is turned off (-1): an edge then keeps
// no accounts.
func (b Budgets) Off() bool {
	return b.AudioBytesPerSecond == -1 && b.AudioBytesPerDay == -1 && b.StoredBytes == -1 && b.MessageChars == -1 &&
		b.NoteChars == -1 && b.MemoryChars == -1 && b.EnvelopeBytes == -1 && b.ConversationsPerHour == -1
}

// OverBudget is why input was refused for a budget: its name, what it
// allows, and when it frees (zero: when the user deletes something).
type OverBudget struct {
	Budget string
	Reason string
	FreeAt time.Time
}

func (o *OverBudget) Error() string { return o.Message(time.Now()) }

// Message is the sentence an ErrorMessage or a 429 carries.
func (o *OverBudget) Message(now time.Time) string {
	s := fmt.Sprintf("over budget %s: %s", o.Budget, o.Reason)
	switch {
	case o.FreeAt.IsZero():
	case !o.FreeAt.After(now):
		s += "; it frees now"
	default:
		s += fmt.Sprintf("; it frees in %s (at %s)", roundUp(o.FreeAt.Sub(now)), o.FreeAt.UTC().Format(time.RFC3339))
	}
	return s
}

// RetryAfter is how long until the budget frees (0: unknown, or now).
func (o *OverBudget) RetryAfter(now time.Time) time.Duration {
	if o.FreeAt.IsZero() || !o.FreeAt.After(now) {
		return 0
	}
	return o.FreeAt.Sub(now)
}

func roundUp(d time.Duration) time.Duration {
	switch {
	case d < time.Second:
		return d.Round(10 * time.Millisecond)
	case d < time.Minute:
		return d.Round(time.Second)
	default:
		return d.Round(time.Minute)
	}
}

// Size prints a byte count for people.
func Size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// CheckText reports a text over its character budget (nil when it fits).
func CheckText(budget string, field string, s string, limit int) *OverBudget {
	if limit < 0 {
		return nil
	}
	if n := utf8.RuneCountInString(s); n > limit {
		return &OverBudget{Budget: budget, Reason: fmt.Sprintf("%s has %d characters, at most %d allowed", field, n, limit)}
	}
	return nil
}

// checkTexts applies the text budgets to a client envelope's body, and the
// envelope size budget to any but audio (frame is its encoded size).
func (b Budgets) checkTexts(env *protocol.Envelope, frame int) *OverBudget {
	if _, audio := env.Body.(*protocol.AudioChunk); !audio && b.EnvelopeBytes > 0 && int64(frame) > b.EnvelopeBytes {
		return &OverBudget{Budget: BudgetEnvelope, Reason: fmt.Sprintf("a %s of %s, at most %s allowed", env.Type, Size(int64(frame)), Size(b.EnvelopeBytes))}
	}
	switch body := env.Body.(type) {
	case *protocol.UserMessage:
		return CheckText(BudgetMessage, "content", body.Content, b.MessageChars)
	case *protocol.ControlVariation:
		if body.NewContent != nil {
			return CheckText(BudgetMessage, "newContent", *body.NewContent, b.MessageChars)
		}
	case *protocol.UserNote:
		return CheckText(BudgetNote, "content", body.Content, b.NoteChars)
	case *protocol.Feedback:
		if body.Note != nil {
			return CheckText(BudgetNote, "note", *body.Note, b.NoteChars)
		}
	case *protocol.Commentary:
		return CheckText(BudgetNote, "content", body.Content, b.NoteChars)
	case *protocol.MemoryAction:
		if body.Memory != nil {
			return CheckText(BudgetMemory, "memory.content", body.Memory.Content, b.MemoryChars)
		}
	}
	return nil
}

// stores reports whether an envelope of this type adds to what the user
// stores (and is refused once the stored budget is spent); control,
// feedback and removal stay possible, so a user over budget can still stop
// an answer, vote, and delete to free space.
func stores(env *protocol.Envelope) bool {
	switch body := env.Body.(type) {
	case *protocol.AudioChunk, *protocol.UserMessage, *protocol.SyncRequest, *protocol.UserNote,
		*protocol.Commentary, *protocol.ControlVariation:
		return true
	case *protocol.MemoryAction:
		return body.Memory != nil && body.Memory.Content != ""
	}
	return false
}

// Meta keys of an over-budget ErrorMessage.
const (
	MetaBudget       = "alicia.budget"
	MetaRetryAfterMs = "alicia.retry_after_ms"
)

// bodyID is the id of a client envelope's body, when it has one.
func bodyID(env *protocol.Envelope) *string {
	var id string
	switch b := env.Body.(type) {
	case *protocol.UserMessage:
		id = b.ID
	case *protocol.UserNote:
		id = b.ID
	case *protocol.Feedback:
		id = b.ID
	case *protocol.Commentary:
		id = b.ID
	case *protocol.MemoryAction:
		id = b.ID
	}
	if id == "" {
		return nil
	}
	return &id
}
