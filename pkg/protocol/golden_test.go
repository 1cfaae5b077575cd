package protocol_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"path"
	"reflect"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/pkg/protocol"
	protoschemas "github.com/alicia-voice/alicia/proto-schemas"
)

type vector struct {
	name    string
	json    []byte
	msgpack []byte
}

func goldenVectors(t testing.TB) []vector {
	t.Helper()
	files, err := fs.Glob(protoschemas.FS, "golden/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden vectors: %v", err)
	}
	var out []vector
	for _, f := range files {
		j, err := protoschemas.FS.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m, err := protoschemas.FS.ReadFile(strings.TrimSuffix(f, ".json") + ".msgpack")
		if err != nil {
			t.Fatalf("%s has no .msgpack twin (run go generate ./pkg/protocol/...): %v", f, err)
		}
		out = append(out, vector{name: strings.TrimSuffix(path.Base(f), ".json"), json: j, msgpack: m})
	}
	return out
}

func TestGoldenEveryTypeHasAVector(t *testing.T) {
	have := map[string]bool{}
	for _, v := range goldenVectors(t) {
		have[v.name] = true
	}
	for _, mt := range protocol.Types() {
		if !have[mt.Token()] {
			t.Errorf("no golden vector %s.json for %s", mt.Token(), mt)
		}
	}
}

func TestGolden(t *testing.T) {
	for _, v := range goldenVectors(t) {
		t.Run(v.name, func(t *testing.T) {
			t.Run("msgpack_roundtrip", func(t *testing.T) {
				env, err := protocol.Decode(v.msgpack)
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if !strings.HasPrefix(v.name, env.Type.Token()) {
					t.Errorf("decoded type %s from %s", env.Type, v.name)
				}
				out, err := protocol.Encode(env)
				if err != nil {
					t.Fatalf("Encode: %v", err)
				}
				if !bytes.Equal(out, v.msgpack) {
					t.Errorf("re-encoded bytes differ\n got %x\nwant %x", out, v.msgpack)
				}
			})
			t.Run("json_to_msgpack", func(t *testing.T) {
				env, err := protocol.DecodeJSON(v.json)
				if err != nil {
					t.Fatalf("DecodeJSON: %v", err)
				}
				out, err := protocol.Encode(env)
				if err != nil {
					t.Fatalf("Encode: %v", err)
				}
				if !bytes.Equal(out, v.msgpack) {
					t.Errorf("JSON encodes to other bytes (stale golden? run go generate ./pkg/protocol/...)\n got %x\nwant %x", out, v.msgpack)
				}
				fromMsgpack, err := protocol.Decode(v.msgpack)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(env, fromMsgpack) {
					t.Errorf("JSON and MessagePack decode to different envelopes:\n%#v\n%#v", env, fromMsgpack)
				}
			})
			t.Run("msgpack_to_json", func(t *testing.T) {
				env, err := protocol.Decode(v.msgpack)
				if err != nil {
					t.Fatal(err)
				}
				out, err := protocol.EncodeJSON(env)
				if err != nil {
					t.Fatalf("EncodeJSON: %v", err)
				}
				var got, want any
				if err := json.Unmarshal(out, &got); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(v.json, &want); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("JSON differs\n got %s\nwant %s", out, v.json)
				}
			})
			t.Run("envelope_schema", func(t *testing.T) {
				var doc any
				d := json.NewDecoder(bytes.NewReader(v.json))
				d.UseNumber()
				if err := d.Decode(&doc); err != nil {
					t.Fatal(err)
				}
				if err := protocol.ValidateEnvelopeJSON(doc); err != nil {
					t.Errorf("envelope.json rejects the vector: %v", err)
				}
			})
		})
	}
}

// TestGoldenNil: every nil vector (golden/nil/<name>.json in JSON and
// <name>.nil.msgpack in MessagePack, optional fields sent as nil) decodes to
// the envelope of <name>.msgpack, the same message without those fields, and
// re-encodes to exactly those canonical bytes.
func TestGoldenNil(t *testing.T) {
	bases, err := fs.Glob(protoschemas.FS, "golden/*.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bases {
		name := strings.TrimSuffix(path.Base(b), ".json")
		t.Run(name, func(t *testing.T) {
			read := func(suffix string) []byte {
				data, err := protoschemas.FS.ReadFile("golden/nil/" + name + suffix)
				if err != nil {
					t.Fatalf("%v (run go generate ./pkg/protocol/...)", err)
				}
				return data
			}
			js, nilMsgpack, canonical := read(".json"), read(".nil.msgpack"), read(".msgpack")
			if !bytes.Contains(js, []byte(": null")) || bytes.Equal(nilMsgpack, canonical) {
				t.Fatal("the vector sends no optional field as nil")
			}
			want, err := protocol.Decode(canonical)
			if err != nil {
				t.Fatalf("Decode %s.msgpack: %v", name, err)
			}
			if out, err := protocol.Encode(want); err != nil || !bytes.Equal(out, canonical) {
				t.Fatalf("%s.msgpack is not canonical: %v", name, err)
			}
			for _, d := range []struct {
				name   string
				decode func() (protocol.Envelope, error)
			}{
				{"msgpack", func() (protocol.Envelope, error) { return protocol.Decode(nilMsgpack) }},
				{"json", func() (protocol.Envelope, error) { return protocol.DecodeJSON(js) }},
			} {
				t.Run(d.name, func(t *testing.T) {
					env, err := d.decode()
					if err != nil {
						t.Fatalf("decode: %v", err)
					}
					if !reflect.DeepEqual(env, want) {
						t.Errorf("decoded\n%#v\nwant\n%#v", env, want)
					}
					out, err := protocol.Encode(env)
					if err != nil {
						t.Fatalf("Encode: %v", err)
					}
					if !bytes.Equal(out, canonical) {
						t.Errorf("re-encoded bytes differ\n got %x\nwant %x", out, canonical)
					}
				})
			}
		})
	}
}
