package vad

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
)

// EndOfTurn is the adaptive end-of-turn rule, a heuristic: the silence that
// ends the user's turn follows the latest transcript of what they said so
// far. A complete sentence or question ends it after Min; words that trail
// off (a conjunction, a filler, an article, a comma, "…") after Max; anything
// else after the detector's EndSilence. Whisper closes partial transcripts
// with a period even mid-thought, so the last word counts before the period.
type EndOfTurn struct {
	// Off: the fixed EndSilence always applies.
	Off bool
	// Min after a complete sentence or question (default 300 ms).
	Min time.Duration
	// Max after words that trail off (default 1 s).
	Max time.Duration
}

// Ending is what a transcript's last words say about the turn.
type Ending int

// Endings.
const (
	Unknown     Ending = iota // no opinion (empty, no closing punctuation)
	Complete                  // a sentence or question that could end the turn
	TrailingOff               // more is coming
)

func (e Ending) String() string {
	switch e {
	case Complete:
		return "complete"
	case TrailingOff:
		return "trailing off"
	}
	return "unknown"
}

func (e EndOfTurn) withDefaults() EndOfTurn {
	if e.Min == 0 {
		e.Min = 300 * time.Millisecond
	}
	if e.Max == 0 {
		e.Max = time.Second
	}
	return e
}

// Validate reports impossible bounds for the detector configured with c:
// at least one frame, Min ≤ EndSilence ≤ Max.
func (e EndOfTurn) Validate(c Config) error {
	if e.Off {
		return nil
	}
	e, c = e.withDefaults(), c.withDefaults()
	var errs []error
	if e.Min < c.Frame {
		errs = append(errs, fmt.Errorf("end-of-turn minimum %s is below one frame (%s)", e.Min, c.Frame))
	}
	if e.Min > c.EndSilence || c.EndSilence > e.Max {
		errs = append(errs, fmt.Errorf("end-of-turn silence: want minimum %s ≤ end silence %s ≤ maximum %s", e.Min, c.EndSilence, e.Max))
	}
	if len(errs) > 0 {
		return errors.Join(append([]error{ErrConfig}, errs...)...)
	}
	return nil
}

// Silence is the end-of-turn silence for transcript, in language (a BCP 47
// tag or ISO 639-1 code; "" is taken as English). 0 means no opinion: the
// detector's EndSilence applies.
func (e EndOfTurn) Silence(transcript, language string) time.Duration {
	if e.Off {
		return 0
	}
	e = e.withDefaults()
	switch Classify(transcript, language) {
	case Complete:
		return e.Min
	case TrailingOff:
		return e.Max
	}
	return 0
}

// Classify says how transcript ends. Languages without word lists are
// judged on punctuation alone, and a period is no verdict for them.
func Classify(transcript, language string) Ending {
	s := strings.TrimRightFunc(transcript, func(r rune) bool {
		return unicode.IsSpace(r) || strings.ContainsRune(`"')]»”’`, r)
	})
	if s == "" {
		return Unknown
	}
	if strings.HasSuffix(s, "...") || strings.HasSuffix(s, "…") {
		return TrailingOff
	}
	last := []rune(s)[len([]rune(s))-1]
	if strings.ContainsRune(",;:-–—", last) {
		return TrailingOff
	}
	words, known := wordLists[baseLanguage(language)]
	if known && words.trailsOff(s, last == '?' || last == '？') {
		return TrailingOff
	}
	switch last {
	case '?', '!', '？', '！':
		return Complete
	case '.', '。':
		if known {
			return Complete
		}
	}
	return Unknown
}

// trailsOff: the last sentence of s ends on a word that wants more ("…
// and", "… the"), is a discourse marker alone ("Actually."), or is a
// subordinate clause still waiting for its main one ("If it rains
// tomorrow."). asked: s ends with a question mark.
func (l endWords) trailsOff(s string, asked bool) bool {
	sentence := lastSentence(s)
	ws := strings.FieldsFunc(strings.ToLower(sentence), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\'' && r != '’'
	})
	for i, w := range ws {
		ws[i] = strings.Trim(strings.ReplaceAll(w, "’", "'"), "'")
	}
	if len(ws) == 0 {
		return false
	}
	in := func(m map[string]struct{}, ws []string) bool {
		_, one := m[ws[len(ws)-1]]
		two := false
		if len(ws) > 1 {
			_, two = m[ws[len(ws)-2]+" "+ws[len(ws)-1]]
		}
		return one || two
	}
	if in(l.always, ws) {
		return true
	}
	if asked {
		return false
	}
	if in(l.unlessAsked, ws) || l.marker(ws) {
		return true
	}
	_, opener := l.openers[ws[0]]
	return opener && !strings.ContainsAny(sentence, ",;")
}

// marker: ws is a discourse marker alone, or two of them ("so actually").
func (l endWords) marker(ws []string) bool {
	is := func(w string) bool { _, ok := l.markers[w]; return ok }
	switch len(ws) {
	case 1:
		return is(ws[0])
	case 2:
		return is(ws[0]+" "+ws[1]) || is(ws[0]) && is(ws[1])
	}
	return false
}

// lastSentence is what follows the last sentence end before the end of s.
func lastSentence(s string) string {
	body := strings.TrimRightFunc(s, func(r rune) bool { return strings.ContainsRune(".?!。？！…", r) })
	if i := strings.LastIndexAny(body, ".?!。？！…"); i >= 0 {
		return body[i+1:]
	}
	return body
}

// baseLanguage is the ISO 639-1 code of a BCP 47 tag or of the language
// name Whisper reports ("english").
func baseLanguage(tag string) string {
	tag = strings.ToLower(tag)
	if i := strings.IndexAny(tag, "-_"); i >= 0 {
		tag = tag[:i]
	}
	switch tag {
	case "", "english":
		return "en"
	case "french":
		return "fr"
	case "german":
		return "de"
	case "spanish":
		return "es"
	}
	return tag
}

// endWords say a turn goes on: last words always (a conjunction, a
// filler, an article) or unless the sentence ends with a question mark
// ("Where are you from?"); a discourse marker alone; a first word that
// opens a subordinate clause.
type endWords struct{ always, unlessAsked, markers, openers map[string]struct{} }

func set(words string) map[string]struct{} {
	m := map[string]struct{}{}
	for _, w := range strings.Split(words, ",") {
		m[strings.TrimSpace(w)] = struct{}{}
	}
	return m
}

var wordLists = map[string]endWords{
	"en": {
		always: set("and, or, but, so, because, cause, cuz, although, though, unless, until, whereas, nor, " +
			"um, umm, uh, uhh, uhm, er, erm, ehm, hmm, mm, " +
			"a, an, the, my, your, our, their, its, every, and then, or maybe, i mean"),
		unlessAsked: set("if, when, while, than, which, whose, also, like, " +
			"to, of, in, on, at, for, with, from, about, into, onto, by, over, under, after, before, between, without, " +
			"i, i'm, i'd, i'll, we, want, wanna, gonna, need, let's, you know"),
		markers: set("actually, well, so, first, firstly, second, now, anyway, also, basically, honestly, oh, right, okay so, and also"),
		openers: set("if, when, whenever, because, since, although, though, unless, while, before, after, once, whereas"),
	},
	"fr": {
		always: set("et, ou, mais, donc, parce, car, euh, heu, bah, ben, le, la, les, un, une, des, du, au, aux, " +
			"mon, ma, mes, ton, ta, tes, son, sa, ses, ce, cette, ces, parce que"),
		unlessAsked: set("que, qui, quand, si, de, à, en, dans, pour, avec, sur, sans, je, tu, il, elle, on, nous, vous, est"),
		markers:     set("alors, bon, donc, enfin, bref, en fait, d'abord"),
		openers:     set("si, quand, lorsque, puisque, comme, parce, avant, après"),
	},
	"de": {
		always: set("und, oder, aber, weil, denn, dass, ähm, äh, öhm, der, die, das, ein, eine, einen, einem, einer, " +
			"mein, meine, dein, deine"),
		unlessAsked: set("wenn, ob, als, zu, von, mit, für, auf, in, an, bei, nach, ich, du, wir, ist"),
		markers:     set("also, naja, tja, erstens, eigentlich"),
		openers:     set("wenn, weil, falls, obwohl, als, bevor, nachdem, während"),
	},
	"es": {
		always:      set("y, o, pero, porque, pues, eh, este, el, la, los, las, un, una, unos, unas, mi, mis, tu, tus, su, sus"),
		unlessAsked: set("que, si, cuando, de, a, en, con, para, por, sin, yo, es"),
		markers:     set("pues, entonces, primero, o sea, en realidad"),
		openers:     set("si, cuando, porque, aunque, mientras, antes, después"),
	},
}

// SetEndSilence sets the silence that ends the open utterance, as decided on
// a transcript of its first heard bytes of Audio (negative: all of it so
// far). It holds while no speech follows that audio — more words make the
// transcript stale — and until the utterance ends; 0 restores EndSilence.
// Without an open utterance it does nothing.
func (d *Detector) SetEndSilence(silence time.Duration, heard int) {
	if !d.inSpeech {
		return
	}
	if heard < 0 {
		heard = len(d.utt)
	}
	d.endSilence, d.endHeard = max(silence, 0), heard
}

// EndSilence is the silence that ends the open utterance now.
func (d *Detector) EndSilence() time.Duration {
	if d.endSilence > 0 && d.endHeard >= d.lastVoicedEnd {
		return d.endSilence
	}
	return d.cfg.EndSilence
}
