package protocol_test

import (
	"encoding/json"
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// nilCase is an envelope as a JSON-model tree, used both as MessagePack
// (nil) and as JSON (null).
type nilCase struct {
	name string
	env  map[string]any
	// want is env without its nil optional fields: what env must decode to.
	want map[string]any
}

func nilCases() []nilCase {
	first := map[string]any{"id": "am_1", "conversationId": "ac_1", "content": "hello"}
	memory := map[string]any{"content": "The user prefers Celsius.", "tags": []any{"units"}}
	memoryAction := func(m map[string]any) map[string]any {
		return map[string]any{"type": 24, "body": map[string]any{"id": "x", "action": "create", "timestamp": 1, "memory": m}}
	}
	syncRequest := func(item map[string]any) map[string]any {
		return map[string]any{"type": 17, "body": map[string]any{"messages": []any{item}}}
	}
	syncItem := map[string]any{"localId": "l1", "sequenceNumber": 1, "role": "user", "contents": "hi", "createdAt": 5}
	return []nilCase{
		{
			// A JavaScript client: @msgpack/msgpack writes an unset previousId as nil.
			name: "first_user_message_previous_id",
			env:  map[string]any{"type": 2, "stanzaId": 1, "body": with(first, "previousId", nil)},
			want: map[string]any{"type": 2, "stanzaId": 1, "body": first},
		},
		{
			name: "every_optional_of_user_message",
			env: map[string]any{"type": 2, "stanzaId": nil, "conversationId": nil, "meta": nil,
				"body": with(with(first, "previousId", nil), "timestamp", nil)},
			want: map[string]any{"type": 2, "body": first},
		},
		{
			name: "configuration_of_a_new_conversation",
			env: map[string]any{"type": 12, "stanzaId": 1, "body": map[string]any{"conversationId": nil, "lastSequenceSeen": nil,
				"clientVersion": "web/1", "preferredLanguage": nil, "device": nil, "features": nil}},
			want: map[string]any{"type": 12, "stanzaId": 1, "body": map[string]any{"clientVersion": "web/1"}},
		},
		{
			name: "optional_enum",
			env:  map[string]any{"type": 10, "body": map[string]any{"conversationId": "ac_1", "stopType": nil, "reason": nil}},
			want: map[string]any{"type": 10, "body": map[string]any{"conversationId": "ac_1"}},
		},
		{
			name: "optional_free_form_value",
			env:  map[string]any{"type": 7, "body": map[string]any{"id": "t", "requestId": "r", "conversationId": "c", "success": true, "result": nil, "errorCode": nil}},
			want: map[string]any{"type": 7, "body": map[string]any{"id": "t", "requestId": "r", "conversationId": "c", "success": true}},
		},
		{
			name: "optional_map_and_array",
			env:  map[string]any{"type": 62, "body": map[string]any{"name": "fs", "action": "upsert", "args": nil, "env": nil, "transport": nil}},
			want: map[string]any{"type": 62, "body": map[string]any{"name": "fs", "action": "upsert"}},
		},
		{
			name: "in_an_array_item",
			env:  syncRequest(with(with(syncItem, "previousId", nil), "updatedAt", nil)),
			want: syncRequest(syncItem),
		},
		{
			name: "in_a_nested_object",
			env:  memoryAction(with(with(with(memory, "id", nil), "importance", nil), "embedding", nil)),
			want: memoryAction(memory),
		},
		{
			name: "optional_object",
			env:  map[string]any{"type": 24, "body": map[string]any{"id": "x", "action": "delete", "timestamp": 1, "memory": nil}},
			want: map[string]any{"type": 24, "body": map[string]any{"id": "x", "action": "delete", "timestamp": 1}},
		},
		{
			name: "bytes_field",
			env:  envWith(sentenceBody(), withBody("audio", nil)),
			want: envWith(sentenceBody()),
		},
		{
			name: "unknown_field",
			env:  envWith(sentenceBody(), withBody("futureField", nil), func(e map[string]any) { e["futureHeader"] = nil }),
			want: envWith(sentenceBody()),
		},
	}
}

func with(m map[string]any, k string, v any) map[string]any {
	m = maps.Clone(m)
	m[k] = v
	return m
}

func jsonOf(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeNilOptionalIsAbsent(t *testing.T) {
	for _, tc := range nilCases() {
		t.Run(tc.name, func(t *testing.T) {
			want, err := protocol.Decode(mp(t, tc.want))
			if err != nil {
				t.Fatalf("the envelope without the nils: %v", err)
			}
			got, err := protocol.Decode(mp(t, tc.env))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("decoded\n%#v\nwant\n%#v", got, want)
			}
		})
	}
}

func TestDecodeJSONNullOptionalIsAbsent(t *testing.T) {
	for _, tc := range nilCases() {
		t.Run(tc.name, func(t *testing.T) {
			want, err := protocol.DecodeJSON(jsonOf(t, tc.want))
			if err != nil {
				t.Fatalf("the envelope without the nulls: %v", err)
			}
			got, err := protocol.DecodeJSON(jsonOf(t, tc.env))
			if err != nil {
				t.Fatalf("DecodeJSON: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("decoded\n%#v\nwant\n%#v", got, want)
			}
		})
	}
}

// Only optional fields take nil for absent: a required field, an array item
// or a map value that is nil is still invalid, with its path.
func TestDecodeNilWhereNotOptional(t *testing.T) {
	syncItem := map[string]any{"localId": nil, "sequenceNumber": 1, "role": "user", "contents": "hi", "createdAt": 5}
	cases := []struct {
		name   string
		env    map[string]any
		code   int32
		reason string
	}{
		{"required", map[string]any{"type": 2, "body": map[string]any{"id": nil, "conversationId": "ac_1", "content": "hi"}},
			protocol.CodeInvalidBody, "body/id: got null, want string"},
		{"required_with_optional_nils", map[string]any{"type": 2, "stanzaId": nil, "body": map[string]any{"id": "am_1", "conversationId": "ac_1", "content": nil, "previousId": nil}},
			protocol.CodeInvalidBody, "body/content: got null, want string"},
		{"required_in_a_nested_object", map[string]any{"type": 24, "body": map[string]any{"id": "x", "action": "create", "timestamp": 1,
			"memory": map[string]any{"content": nil, "id": nil}}}, protocol.CodeInvalidBody, "body/memory/content"},
		{"required_in_an_array_item", map[string]any{"type": 17, "body": map[string]any{"messages": []any{syncItem}}},
			protocol.CodeInvalidBody, "body/messages/0/localId"},
		{"required_array", map[string]any{"type": 17, "body": map[string]any{"messages": nil}},
			protocol.CodeInvalidBody, "body/messages"},
		{"required_enum", map[string]any{"type": 24, "body": map[string]any{"id": "x", "action": nil, "timestamp": 1}},
			protocol.CodeInvalidBody, "body/action"},
		{"array_item", map[string]any{"type": 12, "body": map[string]any{"features": []any{"streaming", nil}}},
			protocol.CodeInvalidBody, "body/features/1"},
		{"map_value", map[string]any{"type": 62, "body": map[string]any{"name": "fs", "action": "upsert", "env": map[string]any{"HOME": nil}}},
			protocol.CodeInvalidBody, "body/env/HOME"},
		{"type", map[string]any{"type": nil, "body": map[string]any{}}, protocol.CodeMalformed, "type"},
		{"body", map[string]any{"type": 2, "body": nil}, protocol.CodeMalformed, "body"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for form, decode := range map[string]func() (protocol.Envelope, error){
				"msgpack": func() (protocol.Envelope, error) { return protocol.Decode(mp(t, tc.env)) },
				"json":    func() (protocol.Envelope, error) { return protocol.DecodeJSON(jsonOf(t, tc.env)) },
			} {
				_, err := decode()
				if got := protocol.Code(err); got != tc.code {
					t.Fatalf("%s: code %d, want %d (%v)", form, got, tc.code, err)
				}
				if !strings.Contains(err.Error(), tc.reason) {
					t.Errorf("%s: %q does not mention %q", form, err, tc.reason)
				}
			}
		})
	}
}

// Inside free-form values (meta, tool parameters) null is a value, kept.
func TestDecodeNullInFreeFormValueIsKept(t *testing.T) {
	env := map[string]any{"type": 6, "meta": map[string]any{"a": nil}, "body": map[string]any{"id": "i", "messageId": "m",
		"conversationId": "c", "toolName": "t", "execution": "server", "parameters": map[string]any{"x": nil}}}
	for form, decode := range map[string]func() (protocol.Envelope, error){
		"msgpack": func() (protocol.Envelope, error) { return protocol.Decode(mp(t, env)) },
		"json":    func() (protocol.Envelope, error) { return protocol.DecodeJSON(jsonOf(t, env)) },
	} {
		got, err := decode()
		if err != nil {
			t.Fatalf("%s: %v", form, err)
		}
		if v, ok := got.Meta["a"]; !ok || v != nil {
			t.Errorf("%s: meta = %#v, want a: nil", form, got.Meta)
		}
		if v, ok := got.Body.(*protocol.ToolUseRequest).Parameters["x"]; !ok || v != nil {
			t.Errorf("%s: parameters = %#v, want x: nil", form, got.Body.(*protocol.ToolUseRequest).Parameters)
		}
	}
}
