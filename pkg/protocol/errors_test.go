package protocol_test

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/vmihailenco/msgpack/v5"
)

// mp encodes v with sorted map keys ([]byte as bin, string as str).
func mp(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sentenceBody() map[string]any {
	return map[string]any{
		"previousId":     "am_1",
		"conversationId": "ac_1",
		"sequence":       1,
		"text":           "Hello.",
	}
}

func envWith(body map[string]any, edits ...func(map[string]any)) map[string]any {
	env := map[string]any{"stanzaId": -3, "conversationId": "ac_1", "type": 16, "body": body}
	for _, e := range edits {
		e(env)
	}
	return env
}

func withBody(k string, v any) func(map[string]any) {
	return func(env map[string]any) { env["body"].(map[string]any)[k] = v }
}

func TestDecodeErrors(t *testing.T) {
	valid := mp(t, envWith(sentenceBody()))
	if _, err := protocol.Decode(valid); err != nil {
		t.Fatalf("valid envelope rejected: %v", err)
	}
	huge := mp(t, envWith(sentenceBody(), withBody("text", strings.Repeat("a", protocol.MaxEnvelopeSize))))
	cases := []struct {
		name   string
		data   []byte
		code   int32
		reason string // substring of the Reason
	}{
		{"empty", nil, protocol.CodeMalformed, "not a MessagePack map"},
		{"truncated", valid[:len(valid)/2], protocol.CodeMalformed, ""},
		{"truncated_last_byte", valid[:len(valid)-1], protocol.CodeMalformed, ""},
		{"trailing_garbage", append(bytes.Clone(valid), 0xc0), protocol.CodeMalformed, "trailing"},
		{"not_a_map", mp(t, []any{1, 2}), protocol.CodeMalformed, "not a MessagePack map"},
		{"nil", []byte{0xc0}, protocol.CodeMalformed, "not a MessagePack map"},
		{"reserved_code", []byte{0xc1}, protocol.CodeMalformed, ""},
		{"forged_map_length", []byte{0xdf, 0xff, 0xff, 0xff, 0xff}, protocol.CodeMalformed, "exceeds"},
		{"stanza_id_string", mp(t, envWith(sentenceBody(), func(e map[string]any) { e["stanzaId"] = "3" })), protocol.CodeMalformed, "stanzaId"},
		{"stanza_id_float", mp(t, envWith(sentenceBody(), func(e map[string]any) { e["stanzaId"] = 1.5 })), protocol.CodeMalformed, "stanzaId"},
		{"stanza_id_over_int32", mp(t, envWith(sentenceBody(), func(e map[string]any) { e["stanzaId"] = int64(math.MaxInt32) + 1 })), protocol.CodeMalformed, "stanzaId"},
		{"type_string", mp(t, envWith(sentenceBody(), func(e map[string]any) { e["type"] = "assistant_sentence" })), protocol.CodeMalformed, "type"},
		{"type_over_uint16", mp(t, envWith(sentenceBody(), func(e map[string]any) { e["type"] = 70000 })), protocol.CodeMalformed, "type"},
		{"type_missing", mp(t, envWith(sentenceBody(), func(e map[string]any) { delete(e, "type") })), protocol.CodeMalformed, "no type"},
		{"body_missing", mp(t, envWith(sentenceBody(), func(e map[string]any) { delete(e, "body") })), protocol.CodeMalformed, "no body"},
		{"body_not_map", mp(t, envWith(sentenceBody(), func(e map[string]any) { e["body"] = "hi" })), protocol.CodeMalformed, "body must be a map"},
		{"conversation_id_int", mp(t, envWith(sentenceBody(), func(e map[string]any) { e["conversationId"] = 7 })), protocol.CodeMalformed, "conversationId"},
		{"meta_not_map", mp(t, envWith(sentenceBody(), func(e map[string]any) { e["meta"] = []any{"x"} })), protocol.CodeMalformed, "meta"},
		{"meta_bin", mp(t, envWith(sentenceBody(), func(e map[string]any) { e["meta"] = map[string]any{"x": []byte{1}} })), protocol.CodeMalformed, "meta/x"},
		{"unknown_type", mp(t, envWith(sentenceBody(), func(e map[string]any) { e["type"] = 19 })), protocol.CodeUnknownType, "19"},
		{"unassigned_type", mp(t, envWith(sentenceBody(), func(e map[string]any) { e["type"] = 19 })), protocol.CodeUnknownType, "19"},
		{"oversized", huge, protocol.CodeTooLarge, "limit"},
		{"missing_required", mp(t, envWith(map[string]any{"previousId": "am_1", "conversationId": "ac_1", "sequence": 1})), protocol.CodeInvalidBody, "text"},
		{"wrong_field_type", mp(t, envWith(sentenceBody(), withBody("sequence", "one"))), protocol.CodeInvalidBody, "body/sequence"},
		{"below_minimum", mp(t, envWith(sentenceBody(), withBody("sequence", 0))), protocol.CodeInvalidBody, "body/sequence"},
		{"over_int32", mp(t, envWith(sentenceBody(), withBody("sequence", int64(math.MaxInt32)+1))), protocol.CodeInvalidBody, "body/sequence"},
		{"float_in_integer", mp(t, envWith(sentenceBody(), withBody("sequence", 2.5))), protocol.CodeInvalidBody, "body/sequence"},
		{"null_required", mp(t, envWith(sentenceBody(), withBody("text", nil))), protocol.CodeInvalidBody, "body/text"},
		{"bytes_as_str", mp(t, envWith(sentenceBody(), withBody("audio", "AAAA"))), protocol.CodeInvalidBody, "body/audio"},
		{"bin_in_string_field", mp(t, envWith(sentenceBody(), withBody("text", []byte("hi")))), protocol.CodeInvalidBody, "body/text"},
		{"bin_in_unknown_field", mp(t, envWith(sentenceBody(), withBody("extra", []byte("hi")))), protocol.CodeInvalidBody, "body/extra"},
		{"invalid_utf8", mp(t, envWith(sentenceBody(), withBody("text", "\xff\xfe"))), protocol.CodeInvalidBody, "body/text"},
		{"nan", mp(t, envWith(map[string]any{"id": "a", "conversationId": "c", "text": "t", "final": true, "confidence": math.NaN()}, func(e map[string]any) { e["type"] = 9 })), protocol.CodeInvalidBody, "body/confidence"},
		{"non_string_key", mp(t, envWith(sentenceBody(), withBody("extra", map[int]any{1: "x"}))), protocol.CodeInvalidBody, "body/extra"},
		{"bad_enum", mp(t, map[string]any{"type": 10, "body": map[string]any{"conversationId": "ac_1", "stopType": "everything"}}), protocol.CodeInvalidBody, "body/stopType"},
		{"bad_enum_in_array", mp(t, map[string]any{"type": 12, "body": map[string]any{"features": []any{"streaming", "telepathy"}}}), protocol.CodeInvalidBody, "body/features/1"},
		{"nested_required", mp(t, map[string]any{"type": 50, "body": map[string]any{"conversationId": "c", "parentMessageId": "p", "newSibling": map[string]any{"id": "x"}, "siblingIds": []any{}}}), protocol.CodeInvalidBody, "body/newSibling"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := protocol.Decode(tc.data)
			if err == nil {
				t.Fatal("Decode accepted the input")
			}
			if got := protocol.Code(err); got != tc.code {
				t.Fatalf("code %d, want %d (%v)", got, tc.code, err)
			}
			if !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("reason %q does not mention %q", err, tc.reason)
			}
		})
	}
}

func TestDecodeAccepts(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]any
	}{
		{"unknown_fields_ignored", envWith(sentenceBody(), withBody("futureField", map[string]any{"a": []any{1, "b"}}), func(e map[string]any) { e["futureHeader"] = true })},
		{"no_stanza_no_conversation", envWith(sentenceBody(), func(e map[string]any) { delete(e, "stanzaId"); delete(e, "conversationId") })},
		{"nil_meta", envWith(sentenceBody(), func(e map[string]any) { e["meta"] = nil })},
		{"nil_optional", envWith(sentenceBody(), withBody("id", nil))},
		{"wide_ints", envWith(sentenceBody(), withBody("sequence", uint64(5)))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env, err := protocol.Decode(mp(t, tc.env))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if _, ok := env.Body.(*protocol.AssistantSentence); !ok {
				t.Fatalf("body %T", env.Body)
			}
		})
	}
}

func TestDecodeJSONErrors(t *testing.T) {
	cases := []struct {
		name string
		data string
		code int32
	}{
		{"not_json", `{"type":`, protocol.CodeMalformed},
		{"array", `[1]`, protocol.CodeMalformed},
		{"trailing", `{"type":16,"body":{}} x`, protocol.CodeMalformed},
		{"type_float", `{"type":16.5,"body":{}}`, protocol.CodeMalformed},
		{"body_not_object", `{"type":16,"body":3}`, protocol.CodeMalformed},
		{"unknown_type", `{"type":19,"body":{}}`, protocol.CodeUnknownType},
		{"missing_required", `{"type":16,"body":{"previousId":"a","conversationId":"c","sequence":1}}`, protocol.CodeInvalidBody},
		{"bad_enum", `{"type":11,"body":{"conversationId":"c","targetId":"t","mode":"rewrite"}}`, protocol.CodeInvalidBody},
		{"bad_base64", `{"type":16,"body":{"previousId":"a","conversationId":"c","sequence":1,"text":"t","audio":"!!!"}}`, protocol.CodeInvalidBody},
		{"too_large", `{"type":16,"body":{"text":"` + strings.Repeat("a", protocol.MaxEnvelopeSize) + `"}}`, protocol.CodeTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := protocol.DecodeJSON([]byte(tc.data))
			if got := protocol.Code(err); got != tc.code {
				t.Fatalf("code %d, want %d (%v)", got, tc.code, err)
			}
		})
	}
}

func TestEncodeRejects(t *testing.T) {
	cases := []struct {
		name string
		env  protocol.Envelope
	}{
		{"no_body", protocol.Envelope{Type: protocol.TypeUserMessage}},
		{"type_mismatch", protocol.Envelope{Type: protocol.TypeUserMessage, Body: &protocol.AssistantMessage{}}},
		{"nil_pointer_body", protocol.Envelope{Type: protocol.TypeUserMessage, Body: (*protocol.UserMessage)(nil)}},
		{"nan", protocol.New("ac_1", &protocol.MemoryTrace{Relevance: math.NaN()})},
		{"bytes_in_meta", protocol.Envelope{Type: protocol.TypeUserMessage, Body: &protocol.UserMessage{}, Meta: map[string]any{"b": []byte{1}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := protocol.Encode(tc.env); err == nil {
				t.Fatal("Encode accepted it")
			}
		})
	}
}
