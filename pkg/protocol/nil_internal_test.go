package protocol

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"path"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/alicia-voice/alicia/pkg/protocol/internal/optfields"
	protoschemas "github.com/alicia-voice/alicia/proto-schemas"
)

// TestNilOptionalEveryField sends every optional field of every golden
// envelope as nil, one at a time (present or absent in the vector, objects
// and arrays included, at any depth), in MessagePack through both schema
// validators and in JSON: each must decode to the envelope without that
// field and re-encode to its canonical bytes. The optional fields come from
// the schema files (optfields), not from the decoder's own schema handling.
func TestNilOptionalEveryField(t *testing.T) {
	schemas, err := optfields.Load(protoschemas.FS)
	if err != nil {
		t.Fatal(err)
	}
	files, err := fs.Glob(protoschemas.FS, "golden/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden vectors: %v", err)
	}
	covered := map[MessageType]map[string]bool{}
	for _, f := range files {
		src, err := protoschemas.FS.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		base, err := protoschemas.FS.ReadFile(strings.TrimSuffix(f, ".json") + ".msgpack")
		if err != nil {
			t.Fatal(err)
		}
		typ := MessageType(mustInt(t, jsonTreeOf(t, src)["type"]))
		shape, err := schemas.Envelope(int(typ))
		if err != nil {
			t.Fatal(err)
		}
		if covered[typ] == nil {
			covered[typ] = map[string]bool{}
		}
		for _, p := range optfields.All(shape, jsonTreeOf(t, src)) {
			covered[typ][p.Pattern()] = true
			t.Run(strings.TrimSuffix(path.Base(f), ".json")+"/"+p.String(), func(t *testing.T) {
				stripped := jsonTreeOf(t, src)
				if err := optfields.Delete(stripped, p); err != nil {
					t.Fatal(err)
				}
				want, err := DecodeJSON(mustJSON(t, stripped))
				if err != nil {
					t.Fatalf("without the field: %v", err)
				}
				wantBytes, err := Encode(want)
				if err != nil {
					t.Fatal(err)
				}

				withNull := jsonTreeOf(t, src)
				if err := optfields.SetNil(withNull, p); err != nil {
					t.Fatal(err)
				}
				js := mustJSON(t, withNull)
				mp := msgpackWithNil(t, base, p)
				for _, d := range []struct {
					name   string
					decode func() (Envelope, error)
				}{
					{"msgpack", func() (Envelope, error) { return Decode(mp) }},
					{"msgpack_full_validator", func() (Envelope, error) { return decodeFull(t, mp) }},
					{"json", func() (Envelope, error) { return DecodeJSON(js) }},
				} {
					got, err := d.decode()
					if err != nil {
						t.Fatalf("%s: %v", d.name, err)
					}
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("%s: decoded\n%#v\nwant the envelope without the field\n%#v", d.name, got, want)
					}
					if b, err := Encode(got); err != nil || !bytes.Equal(b, wantBytes) {
						t.Fatalf("%s: re-encoded %x (%v), want %x", d.name, b, err, wantBytes)
					}
				}
			})
		}
	}
	// Every optional field a schema declares is sent as nil above, at least
	// in one vector of its type; a field inside an optional object no vector
	// has needs a vector that has it.
	for _, mt := range Types() {
		shape, err := schemas.Envelope(int(mt))
		if err != nil {
			t.Fatal(err)
		}
		for _, pat := range optfields.Declared(shape) {
			if !covered[mt][pat] {
				t.Errorf("%s: no golden vector of %s lets %s be sent as nil", mt.Token(), mt, pat)
			}
		}
	}
}

func jsonTreeOf(t *testing.T, src []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.UseNumber()
	var tree map[string]any
	if err := dec.Decode(&tree); err != nil {
		t.Fatal(err)
	}
	return tree
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustInt(t *testing.T, v any) int64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("%v is not a number", v)
	}
	i, err := n.Int64()
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// msgpackWithNil is the canonical envelope data with a nil at p, written as
// a JavaScript encoder writes an unset optional field: key present, value nil.
func msgpackWithNil(t *testing.T, canonical []byte, p optfields.Path) []byte {
	t.Helper()
	dec := msgpack.NewDecoder(bytes.NewReader(canonical)) // not loose: that reads bin as a string
	var tree any
	if err := dec.Decode(&tree); err != nil {
		t.Fatal(err)
	}
	if err := optfields.SetNil(tree, p); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	enc.UseCompactInts(true)
	if err := enc.Encode(tree); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
