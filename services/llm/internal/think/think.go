// Package think separates <think>…</think> blocks, which reasoning models
// write into their content, from the answer. Tags may arrive split across
// any number of deltas.
package think

import "strings"

const (
	open  = "<think>"
	close = "</think>"
)

// Part is a piece of content: answer text or reasoning. End marks the end of
// a reasoning block (Text may then be empty).
type Part struct {
	Reasoning bool
	Text      string
	End       bool
}

// Filter splits streamed content. Not safe for concurrent use.
type Filter struct {
	inside  bool
	pending string // a suffix that may be the start of a tag
}

// Push returns the parts of delta, in order.
func (f *Filter) Push(delta string) []Part {
	s := f.pending + delta
	f.pending = ""
	var out []Part
	for s != "" {
		tag := open
		if f.inside {
			tag = close
		}
		if i := strings.Index(s, tag); i >= 0 {
			out = f.emit(out, s[:i])
			if f.inside {
				out = append(out, Part{Reasoning: true, End: true})
			}
			f.inside = !f.inside
			s = s[i+len(tag):]
			continue
		}
		keep := partialSuffix(s, tag)
		out = f.emit(out, s[:len(s)-keep])
		f.pending = s[len(s)-keep:]
		break
	}
	return out
}

// Flush returns what is held back at the end of the content; an unclosed
// block ends there.
func (f *Filter) Flush() []Part {
	out := f.emit(nil, f.pending)
	if f.inside {
		out = append(out, Part{Reasoning: true, End: true})
	}
	*f = Filter{}
	return out
}

// Inside reports whether the filter is within a reasoning block.
func (f *Filter) Inside() bool { return f.inside }

func (f *Filter) emit(out []Part, text string) []Part {
	if text == "" {
		return out
	}
	return append(out, Part{Reasoning: f.inside, Text: text})
}

// partialSuffix is the length of the longest suffix of s that is a proper
// prefix of tag.
func partialSuffix(s, tag string) int {
	for n := min(len(tag)-1, len(s)); n > 0; n-- {
		if strings.HasSuffix(s, tag[:n]) {
			return n
		}
	}
	return 0
}
