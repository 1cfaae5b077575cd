package chatcmd

import (
	"fmt"
	"io"
	"strings"

	"github.com/alicia-voice/alicia/services/cli/internal/api"
	"github.com/alicia-voice/alicia/services/cli/internal/convcmd"
	"github.com/alicia-voice/alicia/services/cli/internal/style"
)

// printer writes the conversation: one line per answer, its sentences joined
// by spaces as they arrive, with side lines (tools, memories, reasoning,
// errors) between. It remembers what the current line holds so a side line
// or a prompt never lands in the middle of an answer. Every text it is given
// goes through printable before it is styled, plain's excepted (the CLI's
// own words).
type printer struct {
	out, err    io.Writer
	st          style.Style
	interactive bool

	line      lineState
	answering bool // an answer is open (its sentences go on the answer line)
	labelled  bool // the open answer's "alicia> " is printed
	words     int  // sentences on the current answer line
}

type lineState int

const (
	lineEmpty  lineState = iota
	linePrompt           // "you> " waits for the user's input
	lineAnswer           // an answer's sentences
)

const (
	answerLabel  = "alicia> "
	continuation = "        " // an answer resumed after a side line
	asideIndent  = "  "
)

// endLine finishes whatever the current line holds.
func (p *printer) endLine() {
	if p.line != lineEmpty {
		fmt.Fprintln(p.out)
		p.line = lineEmpty
		p.words = 0
	}
}

// prompt shows "you> " when a person types at a terminal.
func (p *printer) prompt() {
	if !p.interactive || p.line == linePrompt {
		return
	}
	p.endLine()
	fmt.Fprint(p.out, p.st.Bold("you> "))
	p.line = linePrompt
}

// inputTaken records that the user ended the prompt line with Enter.
func (p *printer) inputTaken() {
	if p.line == linePrompt {
		p.line = lineEmpty
	}
}

// user echoes what was sent when input does not come from a terminal, so a
// transcript shows both sides.
func (p *printer) user(label, text string) {
	if !p.interactive {
		p.said(label, text)
	}
}

// said prints what someone said on a line of its own: "label> text".
func (p *printer) said(label, text string) {
	p.endLine()
	fmt.Fprintf(p.out, "%s %s\n", p.st.Bold(label+">"), style.Printable(text))
}

// message prints a stored message of a resumed conversation.
func (p *printer) message(m api.Message) {
	p.endLine()
	convcmd.PrintMessage(p.out, p.st, m)
}

// startAnswer opens an answer; its label waits for the first sentence so
// the side lines that come first (memories, reasoning, tools) stay above it.
func (p *printer) startAnswer() {
	p.endLine()
	p.answering, p.labelled = true, false
}

// answerLine makes the current line the open answer's: "alicia> " the
// first time, an indent after a side line interrupted it.
func (p *printer) answerLine() {
	if p.line == lineAnswer {
		return
	}
	p.endLine()
	if p.labelled {
		fmt.Fprint(p.out, continuation)
	} else {
		fmt.Fprint(p.out, p.st.Bold(answerLabel))
		p.labelled = true
	}
	p.line, p.words = lineAnswer, 0
}

// sentence appends one sentence to the open answer.
func (p *printer) sentence(text string) {
	if !p.answering {
		p.startAnswer()
	}
	text = style.OneLine(style.Printable(text))
	if text == "" {
		return
	}
	p.answerLine()
	if p.words > 0 {
		fmt.Fprint(p.out, " ")
	}
	fmt.Fprint(p.out, text)
	p.words++
}

// endAnswer closes the open answer, with a note such as "[stopped]".
func (p *printer) endAnswer(note string) {
	if p.answering && note != "" {
		p.answerLine()
		if p.words > 0 {
			fmt.Fprint(p.out, " ")
		}
		fmt.Fprint(p.out, p.st.Dim(note))
	}
	p.answering = false
	p.endLine()
}

// aside prints a side line: "[kind] text", dimmed on a terminal.
func (p *printer) aside(kind, text string) {
	p.endLine()
	fmt.Fprintln(p.out, asideIndent+p.st.Aside(kind, style.Printable(text)))
}

// errorLine prints an error in the conversation, red on a terminal.
func (p *printer) errorLine(code int32, text string) {
	p.endLine()
	label := "[error]"
	if code != 0 {
		label = fmt.Sprintf("[error %d]", code)
	}
	fmt.Fprintln(p.out, p.st.Red(label+" "+style.OneLine(style.Printable(text))))
}

// plain prints the CLI's own lines as they are (help, a history's heading).
func (p *printer) plain(text string) {
	p.endLine()
	fmt.Fprint(p.out, text)
	if !strings.HasSuffix(text, "\n") {
		fmt.Fprintln(p.out)
	}
}

// note tells the user about the session itself (connection, conversation
// id) on stderr. On a terminal stdout and stderr share the screen, so the
// current line is ended first.
func (p *printer) note(format string, args ...any) {
	if p.interactive {
		p.endLine()
	}
	fmt.Fprintln(p.err, style.Printable(fmt.Sprintf(format, args...)))
}
