package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	protoschemas "github.com/alicia-voice/alicia/proto-schemas"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// schemaSet holds the compiled schemas, built once from the embedded files.
type schemaSet struct {
	envelope *jsonschema.Schema
	bodies   map[MessageType]*jsonschema.Schema
	// bytesFields lists, per type, the top-level properties declared
	// "contentEncoding": "base64": bin in MessagePack, base64 in JSON.
	bytesFields map[MessageType][]string
	// fast holds the compiled fast validator of each type whose schema
	// uses only the keywords it supports (fastschema.go).
	fast map[MessageType]*node
	// notFast says why a type has no fast validator.
	notFast map[MessageType]error
}

var loadSchemas = sync.OnceValues(compileSchemas)

func compileSchemas() (*schemaSet, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	files, err := protoschemas.FS.ReadDir(".")
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if f.IsDir() || !strings.HasSuffix(f.Name(), ".json") {
			continue
		}
		raw, err := protoschemas.FS.ReadFile(f.Name())
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("protocol: schema %s: %w", f.Name(), err)
		}
		if err := c.AddResource(protoschemas.BaseURL+f.Name(), doc); err != nil {
			return nil, fmt.Errorf("protocol: schema %s: %w", f.Name(), err)
		}
	}
	set := &schemaSet{bodies: map[MessageType]*jsonschema.Schema{}, bytesFields: map[MessageType][]string{},
		fast: map[MessageType]*node{}, notFast: map[MessageType]error{}}
	if set.envelope, err = c.Compile(protoschemas.BaseURL + "envelope.json"); err != nil {
		return nil, fmt.Errorf("protocol: compile envelope.json: %w", err)
	}
	for t, info := range registry {
		name := info.token + ".json"
		if set.bodies[t], err = c.Compile(protoschemas.BaseURL + name); err != nil {
			return nil, fmt.Errorf("protocol: compile %s: %w", name, err)
		}
		raw, err := protoschemas.FS.ReadFile(name)
		if err != nil {
			return nil, err
		}
		if n, err := compileFast(raw); err == nil {
			set.fast[t] = n
		} else {
			set.notFast[t] = err
		}
		var doc struct {
			Properties map[string]struct {
				ContentEncoding string `json:"contentEncoding"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			return nil, fmt.Errorf("protocol: %s: %w", name, err)
		}
		for p, s := range doc.Properties {
			if s.ContentEncoding == "base64" {
				set.bytesFields[t] = append(set.bytesFields[t], p)
			}
		}
	}
	return set, nil
}

var printer = message.NewPrinter(language.English)

// schemaReason turns a validation error into one line naming the deepest
// failing field, e.g. "body/sequence: minimum: got 0, want 1".
func schemaReason(prefix string, err error) string {
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return prefix + ": " + err.Error()
	}
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	loc := prefix
	if len(ve.InstanceLocation) > 0 {
		loc += "/" + strings.Join(ve.InstanceLocation, "/")
	}
	return loc + ": " + ve.ErrorKind.LocalizedString(printer)
}

// ValidateEnvelopeJSON checks a JSON-model envelope (as produced by
// encoding/json with UseNumber, or jsonschema.UnmarshalJSON) against
// envelope.json, which selects the body schema by type. It is what a
// non-Go client would run; Decode and DecodeJSON use the per-type schemas
// directly so they can tell header (101/102) from body (103) problems.
func ValidateEnvelopeJSON(v any) error {
	set, err := loadSchemas()
	if err != nil {
		return &Error{Code: CodeInternal, Reason: err.Error()}
	}
	if err := set.envelope.Validate(v); err != nil {
		return &Error{Code: CodeInvalidBody, Reason: schemaReason("envelope", err)}
	}
	return nil
}
