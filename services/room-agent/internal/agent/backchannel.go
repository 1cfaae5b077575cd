package agent

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// Backchannels are the words that, said alone over an answer, tell that
// the person listens ("mm-hmm", "yeah", "right", "okay"): the answer goes on
// (barge-in, bargein.go). By ISO-639-1 language; a transcript whose
// language is unknown is matched against every list.
type Backchannels map[string][]string

// maxBackchannelWords: a longer transcript is never a backchannel.
const maxBackchannelWords = 6

// DefaultBackchannels are the lists used unless ALICIA_BACKCHANNELS
// replaces a language's.
func DefaultBackchannels() Backchannels {
	return Backchannels{
		"en": {"mm-hmm", "mhm", "mm", "hmm", "uh-huh", "uh huh", "yeah", "yep", "yes", "yup", "right", "okay", "ok", "sure",
			"i see", "got it", "alright", "all right", "cool", "nice", "wow", "oh", "ah", "aha", "really", "true", "exactly", "indeed", "of course"},
		"fr": {"mm", "hmm", "oui", "ouais", "d'accord", "ok", "okay", "ah", "oh", "ah bon", "je vois", "voilà", "c'est ça", "exactement", "bien sûr"},
		"de": {"mm", "hmm", "mhm", "ja", "genau", "okay", "ok", "stimmt", "ach so", "aha", "richtig", "klar", "ah", "oh"},
		"es": {"mm", "hmm", "sí", "si", "vale", "ajá", "claro", "ya", "ok", "okay", "bueno", "ah", "oh", "exacto", "ya veo"},
		"it": {"mm", "hmm", "sì", "si", "certo", "ok", "okay", "già", "esatto", "ah", "oh", "capisco", "va bene"},
		"pt": {"mm", "hmm", "sim", "tá", "ok", "okay", "claro", "certo", "ah", "oh", "entendi", "exato"},
	}
}

// ParseBackchannels reads ALICIA_BACKCHANNELS over the defaults: languages
// separated by ";", each "lang=phrase|phrase|…" replacing that language's
// list ("lang=" empties it).
func ParseBackchannels(s string) (Backchannels, error) {
	b := DefaultBackchannels()
	for part := range strings.SplitSeq(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lang, list, ok := strings.Cut(part, "=")
		lang = strings.ToLower(strings.TrimSpace(lang))
		if !ok || len(lang) != 2 {
			return nil, fmt.Errorf("ALICIA_BACKCHANNELS: %q: want lang=phrase|phrase (lang an ISO-639-1 code)", part)
		}
		var phrases []string
		for p := range strings.SplitSeq(list, "|") {
			if p = strings.TrimSpace(p); p != "" {
				if len(words(p)) > maxBackchannelWords {
					return nil, fmt.Errorf("ALICIA_BACKCHANNELS: %q has more than %d words", p, maxBackchannelWords)
				}
				phrases = append(phrases, p)
			}
		}
		b[lang] = phrases
	}
	return b, nil
}

// Validate reports a list that cannot match.
func (b Backchannels) Validate() error {
	for lang, ps := range b {
		for _, p := range ps {
			if len(words(p)) == 0 {
				return errors.New("ALICIA_BACKCHANNELS: an empty phrase in " + lang)
			}
		}
	}
	return nil
}

// Is reports whether text is only backchannel phrases of lang (every
// language's when lang is "" or has no list), repeats allowed ("yeah yeah",
// "okay, okay"): at least one word, at most maxBackchannelWords.
func (b Backchannels) Is(text, lang string) bool {
	ws := words(text)
	if len(ws) == 0 || len(ws) > maxBackchannelWords {
		return false
	}
	var phrases [][]string
	lists := [][]string{b[strings.ToLower(lang)]}
	if len(lists[0]) == 0 {
		lists = lists[:0]
		for _, ps := range b {
			lists = append(lists, ps)
		}
	}
	for _, ps := range lists {
		for _, p := range ps {
			phrases = append(phrases, words(p))
		}
	}
	// Cover ws with phrases, longest first at each position.
	slices.SortFunc(phrases, func(x, y []string) int { return len(y) - len(x) })
	for i := 0; i < len(ws); {
		n := 0
		for _, p := range phrases {
			if len(p) <= len(ws)-i && slices.Equal(ws[i:i+len(p)], p) {
				n = len(p)
				break
			}
		}
		if n == 0 {
			return false
		}
		i += n
	}
	return true
}

// words lowercases s and splits it into words: punctuation goes, hyphens
// split ("mm-hmm" is "mm hmm"), apostrophes stay ("d'accord").
func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\''
	})
}
