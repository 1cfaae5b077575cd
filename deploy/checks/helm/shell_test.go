package helm

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The README's shell commands are read as sh would run them, for the
// subset it uses: '…', "…", \ line continuations, # comments, $NAME and
// ${NAME} of the variables its earlier commands assign, and $(…), whose
// output is unknown here: each one is a distinct placeholder.

// substitution is the placeholder of the n-th $(…).
func substitution(n int) string { return fmt.Sprintf("subst%d", n) }

// shell holds the README's variables as its commands assign them.
type shell struct {
	vars   map[string]string
	substs int
}

// words splits line into words and expands them. An unset variable is an
// error.
func (sh *shell) words(line string) ([]string, error) { return sh.split(line, false) }

// assign runs a line of assignments (NAME=value …) left to right, each
// seeing the ones before it, as sh does.
func (sh *shell) assign(line string) error {
	_, err := sh.split(line, true)
	return err
}

// split is words; with assign, each NAME=value word is set as soon as it
// is read, so that the words after it see it.
func (sh *shell) split(line string, assign bool) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	end := func() {
		w := cur.String()
		words = append(words, w)
		if assign && assignment.MatchString(w) {
			name, value, _ := strings.Cut(w, "=")
			sh.vars[name] = value
		}
		cur.Reset()
		inWord = false
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				end()
			}
		case c == '#' && !inWord:
			i = len(line)
		case c == '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("unterminated ' in %q", line)
			}
			cur.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(line) && line[i] != '"'; i++ {
				switch {
				case line[i] == '$':
					n, v, err := sh.expand(line, i)
					if err != nil {
						return nil, err
					}
					cur.WriteString(v)
					i = n - 1
				case line[i] == '\\' && i+1 < len(line):
					i++
					cur.WriteByte(line[i])
				default:
					cur.WriteByte(line[i])
				}
			}
			if i >= len(line) {
				return nil, fmt.Errorf("unterminated \" in %q", line)
			}
			inWord = true
		case c == '$':
			n, v, err := sh.expand(line, i)
			if err != nil {
				return nil, err
			}
			cur.WriteString(v)
			i = n - 1
			inWord = true
		case c == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		end()
	}
	return words, nil
}

// assignment is a NAME=value word.
var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

var shellName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*`)

// expand reads the expansion at line[i] ('$'): the index after it, and
// its value.
func (sh *shell) expand(line string, i int) (int, string, error) {
	rest := line[i+1:]
	switch {
	case strings.HasPrefix(rest, "("):
		depth := 0
		for j := i + 1; j < len(line); j++ {
			switch line[j] {
			case '(':
				depth++
			case ')':
				if depth--; depth == 0 {
					sh.substs++
					return j + 1, substitution(sh.substs), nil
				}
			}
		}
		return 0, "", fmt.Errorf("unterminated $( in %q", line)
	case strings.HasPrefix(rest, "{"):
		end := strings.IndexByte(rest, '}')
		if end < 0 {
			return 0, "", fmt.Errorf("unterminated ${ in %q", line)
		}
		v, ok := sh.vars[rest[1:end]]
		if !ok {
			return 0, "", fmt.Errorf("%q: $%s is not set by an earlier command", line, rest[:end+1])
		}
		return i + 1 + end + 1, v, nil
	default:
		name := shellName.FindString(rest)
		if name == "" {
			return i + 1, "$", nil
		}
		v, ok := sh.vars[name]
		if !ok {
			return 0, "", fmt.Errorf("%q: $%s is not set by an earlier command", line, name)
		}
		return i + 1 + len(name), v, nil
	}
}

// shellLines are the commands of the text's ```sh blocks, continuation
// lines joined.
func shellLines(text string) []string {
	var lines []string
	in := false
	var cont strings.Builder
	for _, l := range strings.Split(text, "\n") {
		switch {
		case !in && strings.TrimSpace(l) == "```sh":
			in = true
			continue
		case in && strings.TrimSpace(l) == "```":
			in = false
			continue
		case !in:
			continue
		}
		if s, ok := strings.CutSuffix(l, "\\"); ok {
			cont.WriteString(s)
			continue
		}
		cont.WriteString(l)
		if line := strings.TrimSpace(cont.String()); line != "" {
			lines = append(lines, line)
		}
		cont.Reset()
	}
	return lines
}

// TestShellWords: the README's commands are read as sh reads them.
func TestShellWords(t *testing.T) {
	sh := &shell{vars: map[string]string{"REG": "r.example/a", "NS": "alicia"}}
	for line, want := range map[string][]string{
		`helm install a b --set x=$REG --set 'y={nats://n:4222}' # comment`:                                                  {"helm", "install", "a", "b", "--set", "x=r.example/a", "--set", "y={nats://n:4222}"},
		`kubectl -n $NS create secret generic s --from-literal=k="$(openssl rand -hex 24)" --from-literal=u="a:$(x "$(y)")"`: {"kubectl", "-n", "alicia", "create", "secret", "generic", "s", "--from-literal=k=subst1", "--from-literal=u=a:subst2"},
		`x="a\"b" ${NS}-x`: {"x=a\"b", "alicia-x"},
	} {
		got, err := sh.words(line)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s:\n got %q, %v\nwant %q", line, got, err, want)
		}
	}
	if _, err := sh.words(`echo $UNSET`); err == nil {
		t.Error("an unset variable expanded without an error")
	}
	lines := shellLines("text\n```sh\na \\\n  b\n\n# c\n```\n```yaml\nd: e\n```\n")
	if !slices.Equal(lines, []string{"a   b", "# c"}) {
		t.Errorf("shellLines: %q", lines)
	}
}
