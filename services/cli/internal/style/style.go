// Package style decides how the CLI decorates its output: ANSI colours on a
// terminal, plain text otherwise or when NO_COLOR is set (no-color.org).
package style

import (
	"os"
	"strings"
)

// Style decorates text; the zero value is plain.
type Style struct{ Color bool }

// For returns the style for f: colour when f is a terminal and NO_COLOR is
// not set.
func For(f *os.File) Style {
	return forOutput(IsTerminal(f), os.LookupEnv)
}

func forOutput(terminal bool, lookup func(string) (string, bool)) Style {
	_, noColor := lookup("NO_COLOR") // set at all, even empty, means no colour
	return Style{Color: terminal && !noColor}
}

// IsTerminal reports whether f is a character device (a terminal).
func IsTerminal(f *os.File) bool {
	if f == nil {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

const reset = "\x1b[0m"

func (s Style) wrap(code, text string) string {
	if !s.Color || text == "" {
		return text
	}
	return code + text + reset
}

// Dim is for what accompanies an answer: reasoning, tools, memories.
func (s Style) Dim(text string) string { return s.wrap("\x1b[2m", text) }

// Red is for errors.
func (s Style) Red(text string) string { return s.wrap("\x1b[31m", text) }

// Bold is for speaker labels.
func (s Style) Bold(text string) string { return s.wrap("\x1b[1m", text) }

// Aside formats a side line such as "[tool] calculator(…)": dimmed on a
// terminal, with the plain bracketed prefix either way so it stays readable
// in a log.
func (s Style) Aside(kind, text string) string {
	return s.Dim("[" + kind + "] " + text)
}

// OneLine folds newlines so a multi-line text fits on one output line.
func OneLine(text string) string {
	return strings.Join(strings.Fields(text), " ")
}
