package protoschemas_test

import (
	"encoding/json"
	"io/fs"
	"strings"
	"testing"

	protoschemas "github.com/alicia-voice/alicia/proto-schemas"
)

func TestSchemasAreJSONWithIDs(t *testing.T) {
	files, err := fs.Glob(protoschemas.FS, "*.json")
	if err != nil || len(files) < 29 {
		t.Fatalf("%d schema files: %v", len(files), err)
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			raw, err := protoschemas.FS.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]any
			if err := json.Unmarshal(raw, &doc); err != nil {
				t.Fatal(err)
			}
			if doc["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
				t.Errorf("$schema = %v", doc["$schema"])
			}
			if doc["$id"] != protoschemas.BaseURL+f {
				t.Errorf("$id = %v", doc["$id"])
			}
			if ap, ok := doc["additionalProperties"]; ok && ap == false {
				t.Error("unknown properties must stay allowed")
			}
			if strings.Contains(string(raw), `"default"`) {
				t.Error("defaults are documented in descriptions, not applied by decoders")
			}
		})
	}
}
