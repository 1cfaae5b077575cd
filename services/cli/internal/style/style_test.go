package style

import (
	"os"
	"path/filepath"
	"testing"
)

func TestColourChoice(t *testing.T) {
	env := func(vars map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	}
	for _, tc := range []struct {
		name     string
		terminal bool
		vars     map[string]string
		want     bool
	}{
		{"terminal", true, nil, true},
		{"not a terminal", false, nil, false},
		{"NO_COLOR", true, map[string]string{"NO_COLOR": "1"}, false},
		{"NO_COLOR empty", true, map[string]string{"NO_COLOR": ""}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := forOutput(tc.terminal, env(tc.vars)).Color; got != tc.want {
				t.Fatalf("colour = %v, want %v", got, tc.want)
			}
		})
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(f) || IsTerminal(nil) || For(f).Color {
		t.Fatal("a regular file taken for a terminal")
	}
	if got := (Style{Color: true}).Aside("tool", "x"); got != "\x1b[2m[tool] x\x1b[0m" {
		t.Fatalf("Aside = %q", got)
	}
	if got := (Style{}).Red("e"); got != "e" {
		t.Fatalf("plain Red = %q", got)
	}
}
