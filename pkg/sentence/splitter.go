// Package sentence turns a streamed LLM answer into speakable units.
//
// A Splitter (the SentenceSplitter of the llm service) is fed text deltas as
// they arrive and returns each sentence as soon as it is certainly complete:
// a boundary is only decided once enough lookahead has arrived, so feeding a
// text in any number of pieces yields exactly the sentences of feeding it
// whole. Boundaries are sentence-final punctuation followed by a space (not
// after an abbreviation or initial, nor before a lowercase word), CJK full
// stops, and newlines. Code is never split: a ``` fenced block is one unit and
// `inline code` stays inside its sentence. A line that starts with a list
// marker ("1.", "a)", "-", "*", "•") is one unit.
package sentence

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Option configures a Splitter.
type Option func(*Splitter)

// WithMinLength makes units shorter than n runes ("Yes.") wait and be joined,
// with a space, to the unit that follows. Code blocks are never joined. The
// default, 0, emits every unit as it is.
func WithMinLength(n int) Option { return func(s *Splitter) { s.minLen = n } }

// Splitter splits streamed text into sentences. It is not safe for concurrent
// use; use one per answer, or reuse one after Flush.
type Splitter struct {
	minLen int

	buf  []byte // text not yet emitted
	held string // a short unit waiting to be joined (WithMinLength)
	// breaks counts the line breaks since the last unit emitted, which the
	// next unit starts with; emitted: a unit was emitted.
	breaks  int
	emitted bool

	// Scan state, valid for buf[:pos]; a scan resumes where the last one
	// stopped for lack of lookahead.
	pos       int
	fence     int  // length of the open ``` run, 0 outside a fenced block
	inline    int  // length of the open ` run, 0 outside inline code
	lineStart bool // buf begins at the start of a line
	list      int8 // whether the unit is a list item: 0 unknown, 1 yes, -1 no
}

// New returns a Splitter.
func New(opts ...Option) *Splitter {
	s := &Splitter{lineStart: true}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Push adds a delta and returns the sentences it completed, if any.
func (s *Splitter) Push(delta string) []string {
	s.buf = append(s.buf, delta...)
	return s.drain(nil, false)
}

// Flush returns everything still buffered, as sentences, and resets the
// Splitter for a new text.
func (s *Splitter) Flush() []string {
	out := s.drain(nil, true)
	out = s.emit(out, string(s.buf))
	if s.held != "" {
		out = append(out, s.held)
	}
	*s = Splitter{minLen: s.minLen, buf: s.buf[:0], lineStart: true}
	return out
}

func (s *Splitter) drain(out []string, final bool) []string {
	for {
		end, ok := s.next(final)
		if !ok {
			return out
		}
		unit := string(s.buf[:end])
		s.lineStart = strings.HasSuffix(unit, "\n")
		n := copy(s.buf, s.buf[end:])
		s.buf = s.buf[:n]
		s.pos, s.fence, s.inline, s.list = 0, 0, 0, 0
		out = s.emit(out, unit)
	}
}

// emit adds unit to out without its surrounding whitespace, but a unit
// that starts a new line (after a unit already emitted) starts with that
// break, "\n", or "\n\n" for a new paragraph: sentences joined with spaces
// keep the answer's lines, so its Markdown (lists, tables, code blocks,
// paragraphs) survives.
func (s *Splitter) emit(out []string, unit string) []string {
	text := strings.TrimSpace(unit)
	if text == "" {
		s.breaks += strings.Count(unit, "\n")
		return out
	}
	s.breaks += strings.Count(unit[:strings.Index(unit, text)], "\n")
	brk := ""
	if s.emitted || s.held != "" {
		brk = strings.Repeat("\n", min(s.breaks, 2))
	}
	s.breaks = strings.Count(unit[strings.Index(unit, text)+len(text):], "\n")
	code := strings.HasPrefix(text, "```")
	if s.held != "" {
		if code {
			out = append(out, s.held)
			s.emitted = true
		} else if brk != "" {
			text, brk = s.held+brk+text, ""
		} else {
			text = s.held + " " + text
		}
		s.held = ""
	}
	if s.minLen > 0 && utf8.RuneCountInString(text) < s.minLen && !code {
		s.held = brk + text
		return out
	}
	s.emitted = true
	return append(out, brk+text)
}

// next finds the end of the first unit in buf. ok is false when the unit is
// not certainly complete yet; final means no more text will come.
func (s *Splitter) next(final bool) (end int, ok bool) {
	b := s.buf
	i := s.pos
	defer func() { s.pos = i }()
	for i < len(b) {
		c := b[i]
		if s.fence > 0 {
			j := bytes.IndexByte(b[i:], '`')
			if j < 0 {
				i = len(b)
				return 0, false
			}
			i += j
			c = '`'
		}
		if c == '`' {
			n := runLen(b[i:], '`')
			if i+n == len(b) && !final {
				return 0, false // the run may grow
			}
			switch {
			case s.fence > 0:
				if n >= s.fence {
					s.fence = 0
					return i + n, true
				}
			case s.inline > 0:
				if n == s.inline {
					s.inline = 0
				}
			case n >= 3:
				if len(bytes.TrimSpace(b[:i])) > 0 {
					return i, true // text before a fence is its own unit
				}
				s.fence = n
			default:
				s.inline = n
			}
			i += n
			continue
		}
		if c == '\n' {
			s.inline = 0 // an unclosed ` was a literal backtick
			return i + 1, true
		}
		if s.inline > 0 || c < utf8.RuneSelf && !isTerminal(rune(c)) {
			i++
			continue
		}
		if !utf8.FullRune(b[i:]) && !final {
			return 0, false
		}
		r, size := utf8.DecodeRune(b[i:])
		if !isTerminal(r) {
			i += size
			continue
		}
		end, decided, boundary := s.terminal(i, final)
		if !decided {
			return 0, false
		}
		if boundary {
			return end, true
		}
		i = end
	}
	return 0, false
}

// terminal decides whether the punctuation at i ends a unit. end is where the
// unit ends (after closing quotes and brackets) or where scanning resumes.
func (s *Splitter) terminal(i int, final bool) (end int, decided, boundary bool) {
	b := s.buf
	j, hasDot, cjk := i, false, false
	for j < len(b) { // the run: "?!", "...", "。」"
		if !utf8.FullRune(b[j:]) && !final {
			return 0, false, false
		}
		r, size := utf8.DecodeRune(b[j:])
		switch {
		case r == '.' || r == '…':
			hasDot = true
		case r == '。' || r == '！' || r == '？':
			cjk = true
		case isTerminal(r):
		case isCloser(r) && j > i:
		default:
			goto runDone
		}
		j += size
	}
runDone:
	if j == len(b) {
		return j, final, final
	}
	r, _ := utf8.DecodeRune(b[j:])
	if !unicode.IsSpace(r) && !cjk {
		return j, true, false // 3.14, v1.2, example.com/a.b?c=d, e.g.x
	}
	if isList, known := s.listItem(final); !known {
		return 0, false, false
	} else if isList {
		return j, true, false
	}
	if cjk || !hasDot {
		return j, true, true
	}
	// A period: look at the next word.
	k := j
	for k < len(b) {
		if !utf8.FullRune(b[k:]) && !final {
			return 0, false, false
		}
		var size int
		r, size = utf8.DecodeRune(b[k:])
		if r == '\n' {
			return j, true, true
		}
		if !unicode.IsSpace(r) {
			break
		}
		k += size
	}
	if k == len(b) {
		return j, final, final
	}
	if unicode.IsLower(r) {
		return j, true, false // "etc. and", "approx. five", "... maybe"
	}
	if j-i == 1 || (b[i] == '.' && isCloser(rune(b[i+1]))) {
		if w := wordBefore(b, i); noSplitAfter[strings.ToLower(w)] || isInitial(w) {
			return j, true, false
		}
	}
	return j, true, true
}

// listItem reports whether the current unit is a list item, and whether that
// is known yet.
func (s *Splitter) listItem(final bool) (isList, known bool) {
	if s.list != 0 {
		return s.list > 0, true
	}
	if !s.lineStart {
		s.list = -1
		return false, true
	}
	v, known := listMarker(s.buf, final)
	if known {
		s.list = -1
		if v {
			s.list = 1
		}
	}
	return v, known
}

// listMarker reports whether line starts with a list marker: "-", "*", "+",
// "•", up to three digits or a lowercase letter followed by "." or ")", or a
// capital followed by ")", then a space.
func listMarker(line []byte, final bool) (isList, known bool) {
	i := 0
	for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	rest := line[i:]
	space := func(k int) (bool, bool) {
		if k >= len(rest) {
			return false, final
		}
		return rest[k] == ' ' || rest[k] == '\t', true
	}
	switch {
	case len(rest) == 0:
		return false, final
	case rest[0] == '-' || rest[0] == '*' || rest[0] == '+':
		return space(1)
	case bytes.HasPrefix(rest, []byte("•")):
		return space(len("•"))
	}
	n := 0
	for n < len(rest) && n < 4 && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	letter := n == 0 && isASCIILetter(rest[0])
	if letter {
		n = 1
	}
	if n == 0 || n > 3 {
		return false, true
	}
	if n >= len(rest) {
		return false, final
	}
	// "A. Lincoln" starts a sentence; "a." and "A)" start list items.
	if rest[n] != ')' && (rest[n] != '.' || letter && rest[0] < 'a') {
		return false, true
	}
	return space(n + 1)
}

func runLen(b []byte, c byte) int {
	n := 0
	for n < len(b) && b[n] == c {
		n++
	}
	return n
}

func isTerminal(r rune) bool {
	switch r {
	case '.', '!', '?', '…', '。', '！', '？':
		return true
	}
	return false
}

// isCloser is what may follow the final punctuation inside the sentence:
// closing quotes and brackets, and Markdown emphasis.
func isCloser(r rune) bool {
	switch r {
	case '"', '\'', '”', '’', '»', ')', ']', '}', '*', '_', '」', '』', '）', '】':
		return true
	}
	return false
}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// wordBefore returns the letters and inner dots before the period at i:
// "e.g" for "(e.g.", "U.S" for "the U.S.".
func wordBefore(b []byte, i int) string {
	k := i
	for k > 0 && (isASCIILetter(b[k-1]) || b[k-1] == '.') {
		k--
	}
	return strings.TrimLeft(string(b[k:i]), ".")
}

// isInitial is a single capital letter: "J. R. R. Tolkien", "John F. Kennedy".
func isInitial(w string) bool { return len(w) == 1 && w[0] >= 'A' && w[0] <= 'Z' }

// noSplitAfter are abbreviations that precede what they qualify, so a
// capitalised word after them continues the sentence ("Dr. Smith", "e.g.
// Python"). Others (etc., a.m., U.S., Inc.) often end a sentence and split
// before a capital.
var noSplitAfter = map[string]bool{
	"mr": true, "mrs": true, "ms": true, "dr": true, "prof": true, "st": true,
	"sr": true, "mt": true, "vs": true, "e.g": true, "i.e": true, "cf": true,
	"gen": true, "col": true, "capt": true, "lt": true, "sgt": true, "rev": true,
	"hon": true, "fig": true, "figs": true, "approx": true, "dept": true,
	"vol": true, "eg": true, "ie": true, "ca": true, "pres": true,
	"gov": true, "sen": true, "rep": true,
}

// Join puts an answer's sentences back together: a space between two
// sentences, none before a sentence that starts with its line break. It is
// how persistence and the clients assemble an answer's text.
func Join(sentences []string) string {
	var b strings.Builder
	for i, s := range sentences {
		if s == "" {
			continue
		}
		if i > 0 && b.Len() > 0 && !strings.HasPrefix(s, "\n") {
			b.WriteByte(' ')
		}
		b.WriteString(s)
	}
	return b.String()
}
