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

func TestRoundTripGolden(t *testing.T) {
	files, err := fs.Glob(protoschemas.FS, "golden/*.msgpack")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden vectors: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(strings.TrimPrefix(f, "golden/"), ".msgpack"), func(t *testing.T) {
			mp, _ := protoschemas.FS.ReadFile(f)
			want, _ := protoschemas.FS.ReadFile(strings.TrimSuffix(f, ".msgpack") + ".json")
			var js bytes.Buffer
			if err := envelopecmd.Decode(bytes.NewReader(mp), &js); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !strings.Contains(js.String(), "\n  ") {
				t.Error("output is not indented")
			}
			var got, exp any
			if err := json.Unmarshal(js.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			_ = json.Unmarshal(want, &exp)
			if !reflect.DeepEqual(got, exp) {
				t.Errorf("JSON differs:\n%s", js.String())
			}
			var back bytes.Buffer
			if err := envelopecmd.Encode(&js, &back); err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if !bytes.Equal(back.Bytes(), mp) {
				t.Errorf("re-encoded bytes differ:\n%x\n%x", back.Bytes(), mp)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		name string
		run  func(in *strings.Reader, out *bytes.Buffer) error
		in   string
		want string
	}{
		{"decode_garbage", func(in *strings.Reader, out *bytes.Buffer) error { return envelopecmd.Decode(in, out) }, "\x92\x01", "protocol error 101"},
		{"decode_unknown_type", func(in *strings.Reader, out *bytes.Buffer) error { return envelopecmd.Decode(in, out) },
			"\x82\xa4body\x80\xa4type\x13", "protocol error 102"},
		{"encode_bad_json", func(in *strings.Reader, out *bytes.Buffer) error { return envelopecmd.Encode(in, out) }, "{", "protocol error 101"},
		{"encode_bad_enum", func(in *strings.Reader, out *bytes.Buffer) error { return envelopecmd.Encode(in, out) },
			`{"type":10,"body":{"conversationId":"ac_1","stopType":"nope"}}`, "protocol error 103 (invalid body): body/stopType"},
		{"encode_too_large", func(in *strings.Reader, out *bytes.Buffer) error { return envelopecmd.Encode(in, out) },
			strings.Repeat(" ", 2<<20), "protocol error 104"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := tc.run(strings.NewReader(tc.in), &out)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q, want one line containing %q", err, tc.want)
			}
			if out.Len() != 0 {
				t.Errorf("wrote %d bytes on error", out.Len())
			}
		})
	}
}
