// Package wake tells whether a transcript is addressed to Alicia: whether
// it begins with a wake word ("Alicia, what time is it?"), and what the
// request is without it ("What time is it?"). Hands-free mode answers only
// addressed speech (Configuration.wakeWord, ASRJob.wakeWords).
//
// The transcript comes from Whisper, which spells a name it does not know
// in many ways: "Alicia", "Alisha", "Alecia", "Elicia", "a Leesha". So the
// first words (one to three of them, after an optional "hey", "ok", "hi"
// or a hesitation) are compared with each wake word by sound: both are
// reduced to a rough phonetic key (vowels one class, "ci"/"ti"/"sh"
// before a vowel one sound, silent final e dropped) and match when the
// keys begin alike and are at most one edit apart (a sound added or left
// out, or swapped for a like one: "s" for "sh"; none for keys of three
// sounds or fewer, nor for a wake word heard as several words). "Alice",
// "militia" or "a delicious" do not match "Alicia".
package wake

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// DefaultWords are the wake words when none are configured
// (ALICIA_WAKE_WORDS).
var DefaultWords = []string{"alicia"}

// leadIns may come before the wake word ("Hey Alicia", "OK, Alicia",
// "Um, Alicia").
var leadIns = map[string]bool{"hey": true, "hi": true, "hello": true, "ok": true, "okay": true, "oh": true,
	"um": true, "uh": true, "erm": true, "hmm": true}

// maxSpan: a wake word may be transcribed as up to this many words ("a
// Leesha", "Ali sha", "a lee sha").
const maxSpan = 3

// Detector matches transcripts against a set of wake words.
type Detector struct {
	words []wordKey
}

type wordKey struct {
	word string
	key  []byte
}

// New returns a detector for words (case and punctuation ignored; a word
// may be two, as "hey alicia"). Empty words are ignored; none at all means
// DefaultWords.
func New(words []string) *Detector {
	d := &Detector{}
	for _, w := range words {
		toks := tokens(w)
		if len(toks) == 0 {
			continue
		}
		var joined strings.Builder
		var k []byte
		for _, t := range toks {
			joined.WriteString(t.norm)
			next := key(t.norm)
			if len(k) > 0 && len(next) > 0 && k[len(k)-1] == next[0] {
				next = next[1:]
			}
			k = append(k, next...)
		}
		d.words = append(d.words, wordKey{word: joined.String(), key: k})
	}
	if len(d.words) == 0 {
		return New(DefaultWords)
	}
	return d
}

// Words are the detector's wake words, normalised (lower case, letters
// only).
func (d *Detector) Words() []string {
	out := make([]string, len(d.words))
	for i, w := range d.words {
		out[i] = w.word
	}
	return out
}

// Result is what Detect found.
type Result struct {
	// Addressed: the transcript begins with a wake word.
	Addressed bool
	// Request is the transcript without the lead-in and the wake word and
	// the punctuation after them, its first letter upper case ("" when
	// nothing followed the wake word). Not addressed: the transcript as
	// it came, trimmed.
	Request string
	// Heard is how the wake word was transcribed ("Alisha", "a Leesha").
	Heard string
}

// Detect tells whether text begins with a wake word and what follows it.
func (d *Detector) Detect(text string) Result {
	toks := tokens(text)
	res := Result{Request: strings.TrimSpace(text)}
	// Up to two lead-ins ("hey", "um ok") before the wake word.
	for skip := 0; skip <= 2 && skip < len(toks); skip++ {
		if skip > 0 && !leadIns[toks[skip-1].norm] {
			break
		}
		if end, ok := d.matchAt(toks, skip); ok {
			res.Addressed = true
			res.Heard = strings.TrimSpace(text[toks[skip].start:toks[end-1].end])
			res.Request = request(text[toks[end-1].end:])
			return res
		}
	}
	return res
}

// matchAt reports whether a wake word is spoken by the words from i, and
// the index after the last of them. The shortest span that matches wins.
func (d *Detector) matchAt(toks []token, i int) (int, bool) {
	var k []byte
	for end := i + 1; end <= len(toks) && end-i <= maxSpan; end++ {
		// Each word's key, joined: a sound never spans two words ("Alice
		// I" is not "Alicia").
		next := key(toks[end-1].norm)
		if len(k) > 0 && len(next) > 0 && k[len(k)-1] == next[0] {
			next = next[1:]
		}
		k = append(k, next...)
		for _, w := range d.words {
			// Words joined ("a Leesha") must sound exactly like it: a
			// near match across words ("compute the" for "computer")
			// is a coincidence.
			if end-i == 1 && similar(k, w.key) || string(k) == string(w.key) {
				return end, true
			}
		}
	}
	return 0, false
}

// similar: the keys begin with the same sound and are at most one edit
// apart (equal when the wake word's key has three sounds or fewer).
func similar(heard, word []byte) bool {
	if len(heard) == 0 || len(word) == 0 || heard[0] != word[0] {
		return false
	}
	limit := 1
	if len(word) <= 3 {
		limit = 0
	}
	return distance(heard, word, limit) <= limit
}

// request is what follows the wake word: leading punctuation and spaces
// dropped, the first letter upper case.
func request(rest string) string {
	rest = strings.TrimLeftFunc(rest, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsPunct(r) })
	rest = strings.TrimSpace(rest)
	if rest == "" {
		return ""
	}
	r, n := utf8.DecodeRuneInString(rest)
	return string(unicode.ToUpper(r)) + rest[n:]
}

// token is a word of the transcript: its letters in lower case, and where
// it is in the text (bytes).
type token struct {
	norm       string
	start, end int
}

// tokens splits text into words: runs of letters, digits and apostrophes
// (dropped from norm), so "Alicia," and "OK." are "alicia" and "ok", and
// "o.k." is "ok".
func tokens(text string) []token {
	var out []token
	var b strings.Builder
	start := -1
	flush := func(end int) {
		if start >= 0 && b.Len() > 0 {
			out = append(out, token{norm: b.String(), start: start, end: end})
		}
		b.Reset()
		start = -1
	}
	for i, r := range text {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if start < 0 {
				start = i
			}
			b.WriteString(strings.ToLower(string(foldAccent(r))))
		case r == '\'' || r == '’':
			// inside a word: "it's"
		case r == '.' && start >= 0 && b.Len() == 1:
			// "o.k.": a single letter and a dot go on with the next letter
			if next, _ := utf8.DecodeRuneInString(text[i+1:]); unicode.IsLetter(next) {
				continue
			}
			flush(i)
		default:
			flush(i)
		}
	}
	flush(len(text))
	return out
}

// foldAccent maps the accented Latin letters a transcript may hold to
// their base letter ("Alícia").
func foldAccent(r rune) rune {
	if r < 0x80 {
		return r
	}
	if f, ok := accents[unicode.ToLower(r)]; ok {
		return f
	}
	return r
}

var accents = map[rune]rune{'á': 'a', 'à': 'a', 'â': 'a', 'ä': 'a', 'ã': 'a', 'å': 'a', 'é': 'e', 'è': 'e', 'ê': 'e', 'ë': 'e',
	'í': 'i', 'ì': 'i', 'î': 'i', 'ï': 'i', 'ó': 'o', 'ò': 'o', 'ô': 'o', 'ö': 'o', 'õ': 'o', 'ú': 'u', 'ù': 'u', 'û': 'u',
	'ü': 'u', 'ç': 'c', 'ñ': 'n', 'ý': 'y', 'ÿ': 'y'}

// EnvWords is the setting that names the wake words, comma-separated
// (ALICIA_WAKE_WORDS; default "alicia").
const EnvWords = "ALICIA_WAKE_WORDS"

// ParseWords reads a comma-separated list of wake words (ALICIA_WAKE_WORDS),
// trimmed and in lower case; empty means DefaultWords.
func ParseWords(s string) []string {
	var out []string
	for _, w := range strings.Split(s, ",") {
		if w = strings.ToLower(strings.Join(strings.Fields(w), " ")); w != "" {
			out = append(out, w)
		}
	}
	if len(out) == 0 {
		return append([]string(nil), DefaultWords...)
	}
	return out
}
