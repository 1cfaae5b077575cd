package protoschemas_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	protoschemas "github.com/alicia-voice/alicia/proto-schemas"
	"github.com/alicia-voice/alicia/proto-schemas/internal/protodoc"
)

var update = flag.Bool("update", false, "rewrite the generated field tables of PROTOCOL.md")

const protocolDoc = "PROTOCOL.md"

// regenerate is how to bring the tables of PROTOCOL.md up to date.
const regenerate = "go test ./proto-schemas/ -run TestProtocolDoc -update"

// TestProtocolDoc keeps PROTOCOL.md true to the schemas: every message type
// has its section and its row in the summary, and the field table of every
// schema (the envelope's included) is the one the schema gives.
func TestProtocolDoc(t *testing.T) {
	schemas, err := protodoc.Load(protoschemas.FS)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(protocolDoc)
	if err != nil {
		t.Fatal(err)
	}
	got, missing, err := protodoc.Rewrite(doc, schemas)
	if err != nil {
		t.Fatal(err)
	}
	for _, token := range missing {
		t.Errorf("%s has no field table for %s.json: add %q and %q where it belongs, then run %s",
			protocolDoc, token, protodoc.BeginMarker(token), protodoc.EndMarker, regenerate)
	}
	if *update {
		if !bytes.Equal(got, doc) {
			if err := os.WriteFile(protocolDoc, got, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("rewrote the field tables of %s", protocolDoc)
		}
		doc = got
	}
	text := string(doc)

	for _, s := range schemas {
		t.Run(s.Token, func(t *testing.T) {
			table := section(text, protodoc.BeginMarker(s.Token), protodoc.EndMarker)
			for _, f := range s.Fields {
				if !strings.Contains(table, "| `"+f.Path+"` |") {
					t.Errorf("the field table of %s lacks field %s (run %s)", s.Title, f.Path, regenerate)
				}
			}
			if table != "" && table != s.Table() {
				t.Errorf("the field table of %s in %s differs from %s; run %s", s.Title, protocolDoc, s.File, regenerate)
			}
			if s.Number == 0 {
				return
			}
			heading := fmt.Sprintf("### %d %s\n", s.Number, s.Title)
			if !strings.Contains(text, heading) {
				t.Errorf("%s has no section %q", protocolDoc, strings.TrimSpace(heading))
			}
			row := fmt.Sprintf("| %d | [%s](#%d-%s) | %s |", s.Number, s.Title, s.Number, strings.ToLower(s.Title), s.Direction)
			if !strings.Contains(text, "\n"+row) {
				t.Errorf("the summary table of %s has no row starting %q", protocolDoc, row)
			}
		})
	}
}

// TestProtocolDocErrorCodes checks that the error-code tables list every
// code the Go packages define: the protocol's (pkg/protocol/errors.go) and
// the request/reply services' (pkg/rpc/rpc.go).
func TestProtocolDocErrorCodes(t *testing.T) {
	doc, err := os.ReadFile(protocolDoc)
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []struct {
		heading, file string
		re            *regexp.Regexp
	}{
		{"### ErrorMessage codes", "../pkg/protocol/errors.go", regexp.MustCompile(`(?m)^\s+(Code\w+)\s+int32 = (\d+)`)},
		{"### Request/reply error codes", "../pkg/rpc/rpc.go", regexp.MustCompile(`(?m)^\s+(Code\w+)\s+= "(\d+)"`)},
	} {
		codes := section(string(doc), "\n"+src.heading+"\n", "\n#")
		if codes == "" {
			t.Errorf("%s has no section %q", protocolDoc, src.heading)
			continue
		}
		raw, err := os.ReadFile(src.file)
		if os.IsNotExist(err) {
			t.Logf("%s not found (not in the repository's work tree); its codes are not checked", src.file)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		found := src.re.FindAllStringSubmatch(string(raw), -1)
		if len(found) == 0 {
			t.Errorf("no error codes found in %s: has its layout changed?", src.file)
		}
		for _, m := range found {
			if !strings.Contains(codes, "| "+m[2]+" |") {
				t.Errorf("%s of %s lacks %s (%s in %s)", src.heading, protocolDoc, m[2], m[1], src.file)
			}
		}
	}
}

// section returns the text of doc between the first begin and the next end
// after it ("" when begin is absent).
func section(doc, begin, end string) string {
	_, rest, ok := strings.Cut(doc, begin)
	if !ok {
		return ""
	}
	rest = strings.TrimPrefix(rest, "\n")
	body, _, _ := strings.Cut(rest, end)
	return body
}
