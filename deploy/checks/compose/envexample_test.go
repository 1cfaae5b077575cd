package compose_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/deploy/checks/compose"
	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/config"
)

// envEntry is one `NAME=value` line of .env.example, commented out or not.
type envEntry struct {
	value     string
	commented bool
	line      int
}

var envLine = regexp.MustCompile(`^(# )?([A-Z][A-Z0-9_]*)=(.*)$`)

// readEnvExample parses .env.example: its settings, and the problems of its
// form (a setting twice, a block of settings that does not open with a
// sentence saying what they are).
func readEnvExample(t *testing.T, root string) (map[string]envEntry, []string) {
	t.Helper()
	f, err := os.Open(filepath.Join(root, ".env.example"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entries := map[string]envEntry{}
	var problems []string
	sc := bufio.NewScanner(f)
	n, blockStart, blockFirst := 0, 0, ""
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			blockStart, blockFirst = 0, ""
			continue
		}
		if blockStart == 0 {
			blockStart, blockFirst = n, line
		}
		m := envLine.FindStringSubmatch(line)
		if m == nil {
			if !strings.HasPrefix(line, "#") {
				problems = append(problems, ".env.example:"+strconv.Itoa(n)+": neither a comment nor NAME=value")
			}
			continue
		}
		name := m[2]
		if prev, ok := entries[name]; ok {
			problems = append(problems, ".env.example:"+strconv.Itoa(n)+": "+name+" again (first at line "+strconv.Itoa(prev.line)+")")
		}
		entries[name] = envEntry{value: m[3], commented: m[1] != "", line: n}
		if envLine.MatchString(blockFirst) || strings.HasPrefix(blockFirst, "# ---") {
			problems = append(problems, ".env.example:"+strconv.Itoa(n)+": "+name+" has no comment: open its block (line "+strconv.Itoa(blockStart)+") with what it is")
			blockFirst = "# (reported)"
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return entries, problems
}

// composeVariables are the variables docker-compose.yml interpolates
// (${NAME…}; $$ is a literal dollar of a container's shell).
func composeVariables(t *testing.T, root string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	s := string(b)
	for i := 0; i+1 < len(s); i++ {
		if s[i] != '$' {
			continue
		}
		if s[i+1] == '$' {
			i++ // $$: a literal dollar
			continue
		}
		if s[i+1] != '{' {
			continue
		}
		j := i + 2
		for j < len(s) && (s[j] == '_' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= '0' && s[j] <= '9') {
			j++
		}
		if j > i+2 {
			out[s[i+2:j]] = true
		}
	}
	return out
}

// binaries are the programs Alicia ships: each service's and the alicia
// command (alicia up runs every service in one process).
var binaries = []string{"persistence", "gateway", "llm", "memory", "asr", "tts", "room-agent", "cli"}

// TestEnvExample: .env.example names every variable docker-compose.yml
// interpolates and every ALICIA_* variable a binary's source reads (a
// secret's NAME_FILE too), each in a block that opens with a comment
// saying what it is, once; it names no ALICIA_* variable nothing reads;
// only the required ALICIA_LIVEKIT_NODE_IP is set, the rest shown with its
// default, commented out.
func TestEnvExample(t *testing.T) {
	root := repoRoot(t)
	entries, problems := readEnvExample(t, root)
	for _, p := range problems {
		t.Error(p)
	}
	readers := map[string][]string{}
	for name := range composeVariables(t, root) {
		readers[name] = append(readers[name], "docker-compose.yml")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, b := range binaries {
		reads, err := compose.SourceReads(ctx, root, mainPackage(b))
		if err != nil {
			t.Fatal(err)
		}
		for name := range reads {
			readers[name] = append(readers[name], b)
		}
	}
	var missing []string
	for name, by := range readers {
		if _, ok := entries[name]; !ok {
			missing = append(missing, name+" ("+strings.Join(by, ", ")+")")
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf(".env.example lacks %s: add it, commented out with its default, under a comment saying what it does", m)
	}
	for name, e := range entries {
		if strings.HasPrefix(name, "ALICIA_") && readers[name] == nil {
			t.Errorf(".env.example:%d: %s is read by no binary and not by docker-compose.yml: remove it", e.line, name)
		}
		if !e.commented && name != "ALICIA_LIVEKIT_NODE_IP" {
			t.Errorf(".env.example:%d: %s is set: show it commented out (# %s=…) with its default", e.line, name, name)
		}
	}
	if e, ok := entries["ALICIA_LIVEKIT_NODE_IP"]; !ok || e.commented || e.value != "" {
		t.Errorf(".env.example: ALICIA_LIVEKIT_NODE_IP must be there, set and empty (compose then names it as missing), got %+v", e)
	}
}

// TestEnvExampleDefaults: the values .env.example shows are the defaults.
// Every service's configuration, loaded with all of them set, is the one it
// has with none of them (the variables docker-compose.yml interpolates are
// shown with the compose file's defaults and left out); so are the streams'.
func TestEnvExampleDefaults(t *testing.T) {
	r := loadRepo(t)
	entries, _ := readEnvExample(t, r.root)
	fromCompose := composeVariables(t, r.root)
	example := map[string]string{}
	for name, e := range entries {
		if !fromCompose[name] && strings.HasPrefix(name, "ALICIA_") {
			example[name] = e.value
		}
	}
	// What a loader needs to load at all (no default exists for these).
	required := map[string]string{
		"ALICIA_POSTGRES_URL": "postgres://alicia@postgres:5432/alicia", "ALICIA_API_KEYS": "me:0123456789abcdef",
		"ALICIA_LIVEKIT_URL": "ws://livekit:7880", "ALICIA_LIVEKIT_API_KEY": "APIkey", "ALICIA_LIVEKIT_API_SECRET": strings.Repeat("s", 32),
	}
	withExample := merge(example, required)
	for _, svc := range binaries {
		load := loaders[svc]
		if load == nil {
			continue
		}
		t.Run(svc, func(t *testing.T) {
			base, err := r.loadWith(t, load, required, "", "")
			if err != nil {
				t.Fatalf("ConfigFromEnv with only what it requires: %v", err)
			}
			again, err := r.loadWith(t, load, required, "", "")
			if err != nil {
				t.Fatal(err)
			}
			stable := stableFields(base, again)
			got, err := r.loadWith(t, load, withExample, "", "")
			if err != nil {
				t.Fatalf("ConfigFromEnv with every value of .env.example: %v", err)
			}
			if a, b := stable(base), stable(got); !reflect.DeepEqual(a, b) {
				t.Errorf("with .env.example's values the configuration differs from the defaults:\n%s", diffFields(a, b))
			}
		})
	}
	t.Run("streams", func(t *testing.T) {
		values := map[string]string{}
		for name, v := range entries {
			if strings.HasPrefix(name, "ALICIA_") {
				values[name] = v.value
			}
		}
		streams, err := bus.StreamsFrom(config.Source{}.Overlay(".env.example", values))
		if err != nil {
			t.Errorf(".env.example's stream settings: %v", err)
		}
		want, got := bus.StreamConfigs(bus.DefaultStreams()), bus.StreamConfigs(streams)
		for i := range want {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Errorf("with .env.example's values stream %s differs from the default:\n%s", want[i].Name, diffFields(want[i], got[i]))
			}
		}
	})
}

// diffFields names the top-level fields where a and b (structs) differ.
func diffFields(a, b any) string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Kind() != reflect.Struct {
		return "whole value"
	}
	var out []string
	for i := range va.NumField() {
		if va.Type().Field(i).IsExported() && !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			out = append(out, va.Type().Field(i).Name+": default "+short(va.Field(i).Interface())+", with .env.example "+short(vb.Field(i).Interface()))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

func short(v any) string {
	s := strings.ReplaceAll(strings.TrimSpace(strings.ReplaceAll(fmt.Sprintf("%+v", v), "\n", " ")), "  ", " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
