package protocol_test

import (
	"io/fs"
	"runtime"
	"testing"

	"github.com/alicia-voice/alicia/pkg/protocol"
	protoschemas "github.com/alicia-voice/alicia/proto-schemas"
)

// TestDecodeDeclaredLengthBeyondInput: a few bytes that declare a huge
// string, binary, extension, array or map get 101 at once, without the
// decoder allocating what they declare (a 53-byte envelope declaring a
// 2.7 GB string once made it allocate gigabytes).
func TestDecodeDeclaredLengthBeyondInput(t *testing.T) {
	header := []byte("\x83\xa4type\x02\xa8stanzaId\x01\xa4body") // map of 3; body follows
	warm, err := protoschemas.FS.ReadFile("golden/user_message.msgpack")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := protocol.Decode(warm); err != nil { // the schemas compile on first use
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		body string
	}{
		{"str32 in body", "\x81\xa7content\xdb\xa4\x74\x79\x70"},
		{"bin32 in body", "\x81\xa4data\xc6\xff\xff\xff\xff"},
		{"ext32 in body", "\x81\xa4data\xc9\x7f\xff\xff\xff\x01"},
		{"array32 in body", "\x81\xa4tags\xdd\xff\xff\xff\xff\x01"},
		{"map32 as body", "\xdf\x7f\xff\xff\xff"},
		{"map16 as body", "\xde\xff\xff\xa1a"},
		{"str16 key", "\x81\xda\xff\xff"},
		{"truncated length", "\x81\xa4data\xc6\xff\xff"},
		{"never-used code", "\x81\xa1a\xc1"},
		{"nested too deep", deep(40)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			data := append(append([]byte(nil), header...), tt.body...)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := protocol.Decode(data)
			runtime.ReadMemStats(&after)
			if protocol.Code(err) != protocol.CodeMalformed {
				t.Fatalf("Decode = %v, want 101", err)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<10 {
				t.Fatalf("Decode allocated %d bytes for a %d-byte envelope", grew, len(data))
			}
		})
	}
}

func deep(n int) string {
	s := "\x81\xa1a"
	for range n {
		s += "\x91"
	}
	return s + "\x01"
}

// TestDecodeEveryTruncation: every proper prefix of every golden vector is
// rejected with a protocol code (no panic, no hang), and the whole vector
// is still accepted.
func TestDecodeEveryTruncation(t *testing.T) {
	files, err := fs.Glob(protoschemas.FS, "golden/*.msgpack")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden vectors: %v", err)
	}
	for _, name := range files {
		data, err := protoschemas.FS.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := protocol.Decode(data); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for n := range len(data) {
			if _, err := protocol.Decode(data[:n]); protocol.Code(err) == 0 {
				t.Fatalf("%s cut at %d: %v, want a protocol error", name, n, err)
			}
		}
	}
}
