package protocol

import (
	"bytes"
	"io/fs"
	"reflect"
	"regexp"
	"testing"

	protoschemas "github.com/alicia-voice/alicia/proto-schemas"
)

var unsafeNumber = regexp.MustCompile(`[0-9]{16,}|[eE]\+?[0-9]`)

// decodeFull is Decode with the fast validator switched off, so every body
// goes through the JSON tree and the full JSON Schema validator.
func decodeFull(t testing.TB, data []byte) (Envelope, error) {
	t.Helper()
	set, err := loadSchemas()
	if err != nil {
		t.Fatal(err)
	}
	full := *set
	full.fast = nil
	return decodeWith(&full, data)
}

// FuzzDecode: Decode never panics; whatever it accepts re-encodes
// canonically to bytes that decode to the same envelope and re-encode to
// the same bytes; and the fast and full schema validators agree.
func FuzzDecode(f *testing.F) {
	files, err := fs.Glob(protoschemas.FS, "golden/*.msgpack")
	if err != nil || len(files) == 0 {
		f.Fatalf("no golden vectors: %v", err)
	}
	// Optional fields sent as nil, as JavaScript clients do.
	nils, err := fs.Glob(protoschemas.FS, "golden/nil/*.nil.msgpack")
	if err != nil || len(nils) == 0 {
		f.Fatalf("no nil vectors: %v", err)
	}
	for _, name := range append(files, nils...) {
		data, err := protoschemas.FS.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := Decode(data)
		_, fullErr := decodeFull(t, data)
		if Code(err) != Code(fullErr) {
			t.Fatalf("validators disagree: fast %v, full %v", err, fullErr)
		}
		if err != nil {
			if Code(err) == 0 {
				t.Fatalf("error without a protocol code: %v", err)
			}
			return
		}
		enc, err := Encode(env)
		if err != nil {
			t.Fatalf("accepted envelope does not encode: %v", err)
		}
		env2, err := Decode(enc)
		if err != nil {
			t.Fatalf("canonical re-encoding rejected: %v\n%x", err, enc)
		}
		if !reflect.DeepEqual(env, env2) {
			t.Fatalf("round trip changed the envelope:\n%#v\n%#v", env, env2)
		}
		enc2, err := Encode(env2)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding not stable: %v\n%x\n%x", err, enc, enc2)
		}
		js, err := EncodeJSON(env)
		if err != nil {
			t.Fatalf("EncodeJSON: %v", err)
		}
		env3, err := DecodeJSON(js)
		if err != nil {
			t.Fatalf("DecodeJSON of EncodeJSON output: %v\n%s", err, js)
		}
		enc3, err := Encode(env3)
		// Integral numbers beyond ±2^53 are written as float64 (as
		// JavaScript does) but read back from JSON as integers: not safe
		// in JSON, so only their acceptance is checked.
		if err != nil || (!bytes.Equal(enc, enc3) && !unsafeNumber.Match(js)) {
			t.Fatalf("JSON round trip changed the bytes: %v\n%s", err, js)
		}
	})
}

func TestEverySchemaHasFastValidator(t *testing.T) {
	set, err := loadSchemas()
	if err != nil {
		t.Fatal(err)
	}
	for typ, why := range set.notFast {
		t.Errorf("%s uses the slow path: %v", typ, why)
	}
}
