package calc

import (
	"strconv"
	"unicode/utf8"
)

type tokenKind int

const (
	tokEOF tokenKind = iota
	tokNum
	tokIdent
	tokOp // + - * / % ^ ( ) ,
)

type token struct {
	kind tokenKind
	text string  // source text; operators normalised ("**" becomes "^")
	num  float64 // for tokNum
	pos  int     // 1-based rune position
}

// lex splits expr into tokens. Positions count runes, so errors point at what
// a person sees.
func lex(expr string) ([]token, error) {
	var toks []token
	pos := 1
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
			pos++
		case isDigit(c) || (c == '.' && i+1 < len(expr) && isDigit(expr[i+1])):
			n, err := scanNumber(expr[i:], pos)
			if err != nil {
				return nil, err
			}
			v, perr := strconv.ParseFloat(expr[i:i+n], 64)
			if perr != nil {
				return nil, errAt(ErrSyntax, pos, "number out of range %q", expr[i:i+n])
			}
			toks = append(toks, token{kind: tokNum, text: expr[i : i+n], num: v, pos: pos})
			i += n
			pos += n
		case isLetter(c):
			j := i
			for j < len(expr) && (isLetter(expr[j]) || isDigit(expr[j])) {
				j++
			}
			toks = append(toks, token{kind: tokIdent, text: expr[i:j], pos: pos})
			pos += j - i
			i = j
		case c == '*' && i+1 < len(expr) && expr[i+1] == '*':
			toks = append(toks, token{kind: tokOp, text: "^", pos: pos})
			i += 2
			pos += 2
		case c == '+' || c == '-' || c == '*' || c == '/' || c == '%' || c == '^' || c == '(' || c == ')' || c == ',':
			toks = append(toks, token{kind: tokOp, text: string(c), pos: pos})
			i++
			pos++
		default:
			r, size := utf8.DecodeRuneInString(expr[i:])
			op := ""
			switch r {
			case '×', '·':
				op = "*"
			case '÷':
				op = "/"
			case '−':
				op = "-"
			}
			if op == "" {
				if r == utf8.RuneError && size == 1 {
					return nil, errAt(ErrSyntax, pos, "invalid UTF-8")
				}
				return nil, errAt(ErrSyntax, pos, "unexpected '%s'", string(r))
			}
			toks = append(toks, token{kind: tokOp, text: op, pos: pos})
			i += size
			pos++
		}
	}
	return append(toks, token{kind: tokEOF, pos: pos}), nil
}

// scanNumber returns the length of the number at the start of s: digits with
// an optional fraction and exponent. Underscores, hex and the like are refused.
func scanNumber(s string, pos int) (int, error) {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j >= len(s) || !isDigit(s[j]) {
			return 0, errAt(ErrSyntax, pos, "malformed number %q", s[:j])
		}
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		i = j
	}
	if i < len(s) && (s[i] == '_' || s[i] == '.' || isLetter(s[i])) {
		return 0, errAt(ErrSyntax, pos+i, "unexpected '%s' in number", s[i:i+1])
	}
	return i, nil
}

func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' }
