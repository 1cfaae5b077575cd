package compose

import (
	"fmt"
	"strings"
)

// Interpolate expands s as compose does: $$ is a literal $, and $NAME,
// ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:?error},
// ${NAME?error}, ${NAME:+alternative} and ${NAME+alternative} take NAME from
// env (the forms with a colon treat an empty value as unset). The default,
// error and alternative are interpolated too, when used. A missing
// required variable is an error carrying its message.
func Interpolate(s string, env map[string]string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		if c != '$' || i+1 == len(s) {
			b.WriteByte(c)
			i++
			continue
		}
		switch next := s[i+1]; {
		case next == '$':
			b.WriteByte('$')
			i += 2
		case next == '{':
			end := closingBrace(s, i+2)
			if end < 0 {
				return "", fmt.Errorf("unterminated ${ in %q", s)
			}
			v, err := expand(s[i+2:end], env)
			if err != nil {
				return "", err
			}
			b.WriteString(v)
			i = end + 1
		case isNameByte(next):
			j := i + 1
			for j < len(s) && isNameByte(s[j]) {
				j++
			}
			b.WriteString(env[s[i+1:j]])
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), nil
}

// expand evaluates the inside of ${…}.
func expand(inner string, env map[string]string) (string, error) {
	j := 0
	for j < len(inner) && isNameByte(inner[j]) {
		j++
	}
	name, op := inner[:j], inner[j:]
	if name == "" {
		return "", fmt.Errorf("bad substitution ${%s}", inner)
	}
	v, set := env[name]
	colon := strings.HasPrefix(op, ":")
	if colon {
		op = op[1:]
		set = set && v != ""
	}
	if op == "" {
		if colon {
			return "", fmt.Errorf("bad substitution ${%s}", inner)
		}
		return v, nil
	}
	arg := op[1:]
	switch op[0] {
	case '-':
		if set {
			return v, nil
		}
		return Interpolate(arg, env)
	case '?':
		if set {
			return v, nil
		}
		msg, err := Interpolate(arg, env)
		if err != nil {
			return "", err
		}
		return "", fmt.Errorf("required variable %s is missing a value: %s", name, msg)
	case '+':
		if set {
			return Interpolate(arg, env)
		}
		return "", nil
	}
	return "", fmt.Errorf("bad substitution ${%s}", inner)
}

// closingBrace returns the index of the } that closes a ${ whose content
// starts at from, skipping nested ${…}; -1 when there is none.
func closingBrace(s string, from int) int {
	depth := 0
	for i := from; i < len(s); i++ {
		switch {
		case s[i] == '$' && i+1 < len(s) && s[i+1] == '$':
			i++
		case s[i] == '$' && i+1 < len(s) && s[i+1] == '{':
			depth++
			i++
		case s[i] == '}':
			if depth == 0 {
				return i
			}
			depth--
		}
	}
	return -1
}

func isNameByte(c byte) bool {
	return c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
}
