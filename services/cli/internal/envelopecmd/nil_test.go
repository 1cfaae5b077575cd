package envelopecmd_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"reflect"
	"strings"
	"testing"

	protoschemas "github.com/alicia-voice/alicia/proto-schemas"
	"github.com/alicia-voice/alicia/services/cli/internal/envelopecmd"
)

// `alicia envelope encode` reads null optional fields as absent: the bytes
// are those of the envelope without them.
func TestEncodeNullOptionals(t *testing.T) {
	cases := []struct {
		name, in, without string
	}{
		{"first_user_message",
			`{"type":2,"stanzaId":1,"body":{"id":"am_1","conversationId":"ac_1","content":"hi","previousId":null,"timestamp":null}}`,
			`{"type":2,"stanzaId":1,"body":{"id":"am_1","conversationId":"ac_1","content":"hi"}}`},
		{"envelope_header",
			`{"type":10,"stanzaId":null,"conversationId":null,"meta":null,"body":{"conversationId":"ac_1"}}`,
			`{"type":10,"body":{"conversationId":"ac_1"}}`},
		{"in_an_array_item",
			`{"type":17,"body":{"messages":[{"localId":"l1","sequenceNumber":1,"previousId":null,"role":"user","contents":"hi","createdAt":5,"updatedAt":null}]}}`,
			`{"type":17,"body":{"messages":[{"localId":"l1","sequenceNumber":1,"role":"user","contents":"hi","createdAt":5}]}}`},
		{"in_a_nested_object",
			`{"type":24,"body":{"id":"x","action":"create","timestamp":1,"memory":{"id":null,"content":"c","tags":null,"importance":null}}}`,
			`{"type":24,"body":{"id":"x","action":"create","timestamp":1,"memory":{"content":"c"}}}`},
		{"bytes_field",
			`{"type":16,"body":{"previousId":"am_1","conversationId":"ac_1","sequence":1,"text":"Hi.","audio":null,"isFinal":null}}`,
			`{"type":16,"body":{"previousId":"am_1","conversationId":"ac_1","sequence":1,"text":"Hi."}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got, want bytes.Buffer
			if err := envelopecmd.Encode(strings.NewReader(tc.in), &got); err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if err := envelopecmd.Encode(strings.NewReader(tc.without), &want); err != nil {
				t.Fatalf("Encode without the nulls: %v", err)
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Errorf("bytes\n%x\nwant\n%x", got.Bytes(), want.Bytes())
			}
		})
	}
}

// A required field that is null is still an invalid body, named.
func TestEncodeNullRequired(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"body_field", `{"type":2,"body":{"id":null,"conversationId":"ac_1","content":"hi","previousId":null}}`,
			"protocol error 103 (invalid body): body/id"},
		{"in_a_nested_object", `{"type":24,"body":{"id":"x","action":"create","timestamp":1,"memory":{"content":null}}}`,
			"protocol error 103 (invalid body): body/memory/content"},
		{"in_an_array_item", `{"type":17,"body":{"messages":[{"localId":null,"sequenceNumber":1,"role":"user","contents":"hi","createdAt":5}]}}`,
			"protocol error 103 (invalid body): body/messages/0/localId"},
		{"type", `{"type":null,"body":{}}`, "protocol error 101"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := envelopecmd.Encode(strings.NewReader(tc.in), &out)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if out.Len() != 0 {
				t.Errorf("wrote %d bytes on error", out.Len())
			}
		})
	}
}

// The nil golden vectors: encode turns nil/<name>.json into the canonical
// nil/<name>.msgpack, and decode turns nil/<name>.nil.msgpack into the JSON
// of that canonical envelope.
func TestNilGolden(t *testing.T) {
	files, err := fs.Glob(protoschemas.FS, "golden/nil/*.nil.msgpack")
	if err != nil || len(files) == 0 {
		t.Fatalf("no nil vectors: %v", err)
	}
	for _, f := range files {
		base := strings.TrimSuffix(f, ".nil.msgpack")
		t.Run(strings.TrimPrefix(base, "golden/nil/"), func(t *testing.T) {
			js, _ := protoschemas.FS.ReadFile(base + ".json")
			nilMsgpack, _ := protoschemas.FS.ReadFile(f)
			canonical, _ := protoschemas.FS.ReadFile(base + ".msgpack")
			var enc bytes.Buffer
			if err := envelopecmd.Encode(bytes.NewReader(js), &enc); err != nil {
				t.Fatalf("encode: %v", err)
			}
			if !bytes.Equal(enc.Bytes(), canonical) {
				t.Errorf("encode gave\n%x\nwant\n%x", enc.Bytes(), canonical)
			}
			var fromNil, fromCanonical bytes.Buffer
			if err := envelopecmd.Decode(bytes.NewReader(nilMsgpack), &fromNil); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if err := envelopecmd.Decode(bytes.NewReader(canonical), &fromCanonical); err != nil {
				t.Fatal(err)
			}
			var got, want any
			if err := json.Unmarshal(fromNil.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(fromCanonical.Bytes(), &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("decode gave\n%s\nwant\n%s", fromNil.String(), fromCanonical.String())
			}
		})
	}
}
