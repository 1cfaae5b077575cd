// Package calc parses and evaluates arithmetic expressions for the calculator
// tool. It is a recursive-descent parser over a small tokenizer: nothing in the
// input is ever executed as code.
//
// Grammar, loosest binding first:
//
//	expr   = term { ("+" | "-") term }
//	term   = unary { ("*" | "/" | "%") unary }
//	unary  = ("-" | "+") unary | power
//	power  = atom [ "^" unary ]          // right-associative; -2^2 = -4
//	atom   = number | name | name "(" expr { "," expr } ")" | "(" expr ")"
//
// "**", "×", "÷" and "−" are accepted as spellings of "^", "*", "/" and "-",
// since language models write them.
package calc

import (
	"math"
	"strings"
	"unicode/utf8"
)

// Limits that keep a hostile expression cheap.
const (
	MaxLength = 1000 // characters
	MaxDepth  = 100  // nested parentheses, function calls and prefix/power chains
)

// Eval parses expr and returns its value. The result is always finite.
func Eval(expr string) (float64, error) {
	if n := utf8.RuneCountInString(expr); n > MaxLength {
		return 0, errAt(ErrTooLong, 0, "expression too long (%d characters, at most %d)", n, MaxLength)
	}
	toks, err := lex(expr)
	if err != nil {
		return 0, err
	}
	p := &parser{toks: toks}
	if p.peek().kind == tokEOF {
		return 0, errAt(ErrSyntax, 0, "empty expression")
	}
	v, err := p.expr()
	if err != nil {
		return 0, err
	}
	if t := p.peek(); t.kind != tokEOF {
		return 0, unexpected(t)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, errAt(ErrNotFinite, 0, "result is not a finite number")
	}
	return v, nil
}

type parser struct {
	toks  []token
	i     int
	depth int
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tokEOF {
		p.i++
	}
	return t
}

func (p *parser) isOp(ops ...string) bool {
	t := p.peek()
	if t.kind != tokOp {
		return false
	}
	for _, op := range ops {
		if t.text == op {
			return true
		}
	}
	return false
}

// enter guards every recursive descent so depth stays bounded.
func (p *parser) enter(pos int) error {
	p.depth++
	if p.depth > MaxDepth {
		return errAt(ErrTooDeep, pos, "expression nested too deeply (more than %d levels)", MaxDepth)
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

func (p *parser) expr() (float64, error) {
	v, err := p.term()
	if err != nil {
		return 0, err
	}
	for p.isOp("+", "-") {
		op := p.next()
		r, err := p.term()
		if err != nil {
			return 0, err
		}
		if op.text == "+" {
			v += r
		} else {
			v -= r
		}
	}
	return v, nil
}

func (p *parser) term() (float64, error) {
	v, err := p.unary()
	if err != nil {
		return 0, err
	}
	for p.isOp("*", "/", "%") {
		op := p.next()
		r, err := p.unary()
		if err != nil {
			return 0, err
		}
		switch op.text {
		case "*":
			v *= r
		case "/":
			if r == 0 {
				return 0, errAt(ErrDivisionByZero, op.pos, "division by zero")
			}
			v /= r
		case "%":
			if r == 0 {
				return 0, errAt(ErrDivisionByZero, op.pos, "division by zero")
			}
			v = math.Mod(v, r)
		}
	}
	return v, nil
}

func (p *parser) unary() (float64, error) {
	if !p.isOp("-", "+") {
		return p.power()
	}
	op := p.next()
	if err := p.enter(op.pos); err != nil {
		return 0, err
	}
	defer p.leave()
	v, err := p.unary()
	if err != nil {
		return 0, err
	}
	if op.text == "-" {
		return -v, nil
	}
	return v, nil
}

func (p *parser) power() (float64, error) {
	base, err := p.atom()
	if err != nil {
		return 0, err
	}
	if !p.isOp("^") {
		return base, nil
	}
	op := p.next()
	if err := p.enter(op.pos); err != nil {
		return 0, err
	}
	defer p.leave()
	exp, err := p.unary()
	if err != nil {
		return 0, err
	}
	return math.Pow(base, exp), nil
}

func (p *parser) atom() (float64, error) {
	t := p.next()
	switch {
	case t.kind == tokNum:
		return t.num, nil
	case t.kind == tokIdent:
		return p.name(t)
	case t.kind == tokOp && t.text == "(":
		if err := p.enter(t.pos); err != nil {
			return 0, err
		}
		defer p.leave()
		v, err := p.expr()
		if err != nil {
			return 0, err
		}
		if err := p.expect(")"); err != nil {
			return 0, err
		}
		return v, nil
	}
	return 0, unexpected(t)
}

func (p *parser) expect(op string) error {
	if t := p.peek(); t.kind != tokOp || t.text != op {
		if t.kind == tokEOF {
			return errAt(ErrSyntax, t.pos, "missing %q", op)
		}
		return unexpected(t)
	}
	p.next()
	return nil
}

// name evaluates a constant or a function call starting at identifier t.
func (p *parser) name(t token) (float64, error) {
	name := strings.ToLower(t.text)
	if !p.isOp("(") {
		if v, ok := constants[name]; ok {
			return v, nil
		}
		if _, ok := functions[name]; ok {
			return 0, errAt(ErrSyntax, p.peek().pos, "expected '(' after %s", t.text)
		}
		return 0, errAt(ErrUnknownName, t.pos, "unknown name %s", t.text)
	}
	fn, ok := functions[name]
	if !ok {
		return 0, errAt(ErrUnknownFunction, t.pos, "unknown function %s", t.text)
	}
	open := p.next()
	if err := p.enter(open.pos); err != nil {
		return 0, err
	}
	defer p.leave()
	var args []float64
	if !p.isOp(")") {
		for {
			v, err := p.expr()
			if err != nil {
				return 0, err
			}
			args = append(args, v)
			if !p.isOp(",") {
				break
			}
			p.next()
		}
	}
	if err := p.expect(")"); err != nil {
		return 0, err
	}
	if len(args) < fn.minArgs || (fn.maxArgs >= 0 && len(args) > fn.maxArgs) {
		return 0, errAt(ErrArgCount, t.pos, "wrong number of arguments to %s (%s)", name, fn.arity())
	}
	return fn.call(t, args)
}
