package compose

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Module is the import path prefix of the repository's Go packages.
const Module = "github.com/alicia-voice/alicia"

// RuntimeEnv are variables the Go runtime itself reads in every binary.
var RuntimeEnv = []string{"GOMAXPROCS", "GODEBUG", "GOGC", "GOMEMLIMIT", "GOTRACEBACK"}

var envName = regexp.MustCompile(`^ALICIA_[A-Z0-9_]*[A-Z0-9]$`)

// RepoRoot is the repository's root: the first folder holding go.work
// from the working directory up.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work above the working directory")
		}
		dir = parent
	}
}

// GoCommand is the go command run at repoRoot in the repository's
// workspace (its go.work), whatever GOWORK the checks themselves run with:
// the checks module lives outside the workspace (GOWORK=off), the binaries
// it looks at are built in it.
func GoCommand(ctx context.Context, repoRoot string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(repoRoot, "go.work"))
	return cmd
}

// SourceReads returns the ALICIA_* variables the binary built from mainPkg
// (a package path relative to repoRoot, e.g. ./services/asr/cmd/asr) can
// read, as far as its source says: every string literal or string constant
// of the repository's non-test packages it is built from that is exactly a
// variable name, and NAME_FILE for each config.Secret(NAME, …) or
// <source>.Secret(NAME, …) with a constant NAME (the helper also reads the file NAME_FILE names). Names
// built at run time ("ALICIA_"+prefix+"_URL") are not seen: the tests find
// those by their effect on the service's configuration.
func SourceReads(ctx context.Context, repoRoot, mainPkg string) (map[string]bool, error) {
	cmd := GoCommand(ctx, repoRoot, "list", "-deps", "-f",
		"{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \" \"}} {{join .CgoFiles \" \"}}", mainPkg)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -deps %s: %w: %s", mainPkg, err, stderr.String())
	}
	reads := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), "\t", 3)
		if len(parts) != 3 || (parts[0] != Module && !strings.HasPrefix(parts[0], Module+"/")) {
			continue
		}
		for _, f := range strings.Fields(parts[2]) {
			if err := scanFile(filepath.Join(parts[1], f), reads); err != nil {
				return nil, err
			}
		}
	}
	return reads, sc.Err()
}

// scanFile adds the names one Go file reads to reads.
func scanFile(path string, reads map[string]bool) error {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return err
	}
	consts := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok {
			for i, name := range vs.Names {
				if i < len(vs.Values) {
					if s, ok := stringLit(vs.Values[i]); ok {
						consts[name.Name] = s
					}
				}
			}
		}
		return true
	})
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BasicLit:
			if s, ok := stringLit(n); ok && envName.MatchString(s) {
				reads[s] = true
			}
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			// config.Secret(NAME, …) or src.Secret(NAME, …) of a
			// config.Source: the name, not the receiver, says it is a
			// setting.
			if !ok || sel.Sel.Name != "Secret" || len(n.Args) == 0 {
				return true
			}
			name, ok := stringLit(n.Args[0])
			if id, isIdent := n.Args[0].(*ast.Ident); !ok && isIdent {
				name, ok = consts[id.Name]
			}
			if ok && envName.MatchString(name) {
				reads[name+"_FILE"] = true
			}
		}
		return true
	})
	return nil
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}
