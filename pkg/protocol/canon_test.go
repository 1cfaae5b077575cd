package protocol_test

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

func TestCanonicalEncoding(t *testing.T) {
	cases := []struct {
		name string
		env  protocol.Envelope
		hex  string
	}{
		{
			// keys sorted at every level (struct fields, free-form maps,
			// meta); 1 and 2.0 as fixints, 0.5 as float64, -1 as a negative
			// fixint; absent optional timeoutMs omitted.
			name: "sorted_keys_and_numbers",
			env: protocol.Envelope{
				StanzaID: -1,
				Type:     protocol.TypeToolUseRequest,
				Meta:     map[string]any{"b": 1, "a": 0.5},
				Body: &protocol.ToolUseRequest{
					ID: "i", MessageID: "m", ConversationID: "c", ToolName: "t",
					Execution:  protocol.ToolUseRequestExecutionServer,
					Parameters: protocol.ToolUseRequestParameters{"z": 2.0, "a": []any{"x"}},
				},
			},
			hex: "84" + "a4626f6479" + "86" +
				"ae636f6e766572736174696f6e4964" + "a163" +
				"a9657865637574696f6e" + "a6736572766572" +
				"a26964" + "a169" +
				"a96d6573736167654964" + "a16d" +
				"aa706172616d6574657273" + "82" + "a161" + "91a178" + "a17a" + "02" +
				"a8746f6f6c4e616d65" + "a174" +
				"a46d657461" + "82" + "a161" + "cb3fe0000000000000" + "a162" + "01" +
				"a87374616e7a614964" + "ff" +
				"a474797065" + "06",
		},
		{
			name: "bytes_as_bin_large_ints",
			env: protocol.Envelope{
				Type: protocol.TypeAudioChunk,
				Body: &protocol.AudioChunk{ConversationID: "c", Format: "f", Sequence: 300, DurationMs: 20,
					Data: []byte{1, 2}, Timestamp: protocol.Ptr[int64](1763805123456)},
			},
			hex: "82" + "a4626f6479" + "86" +
				"ae636f6e766572736174696f6e4964" + "a163" +
				"a464617461" + "c4020102" +
				"aa6475726174696f6e4d73" + "14" +
				"a6666f726d6174" + "a166" +
				"a873657175656e6365" + "cd012c" +
				"a974696d657374616d70" + "cf0000019aaafa5380" +
				"a474797065" + "04",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := protocol.Encode(tc.env)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := hex.DecodeString(tc.hex)
			if !bytes.Equal(got, want) {
				t.Errorf("got  %x\nwant %x", got, want)
			}
		})
	}
}
