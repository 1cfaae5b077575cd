package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"

	"github.com/vmihailenco/msgpack/v5"
)

// DecodeJSON parses the JSON form of an envelope (bytes fields as base64
// strings) with the same checks and error codes as Decode.
func DecodeJSON(data []byte) (Envelope, error) {
	var env Envelope
	if len(data) > MaxEnvelopeSize {
		return env, errorf(CodeTooLarge, "envelope is %d bytes, limit %d", len(data), MaxEnvelopeSize)
	}
	set, err := loadSchemas()
	if err != nil {
		return env, &Error{Code: CodeInternal, Reason: err.Error()}
	}
	var header map[string]json.RawMessage
	if err := json.Unmarshal(data, &header); err != nil || header == nil {
		return env, errorf(CodeMalformed, "envelope is not a JSON object")
	}
	for k, raw := range header {
		if k != "type" && k != "body" && string(bytes.TrimSpace(raw)) == "null" {
			delete(header, k) // an optional header field sent as null is absent
		}
	}
	if raw, ok := header["stanzaId"]; ok {
		v, err := jsonInt(raw, "stanzaId", math.MinInt32, math.MaxInt32)
		if err != nil {
			return env, err
		}
		env.StanzaID = int32(v)
	}
	raw, ok := header["type"]
	if !ok {
		return env, errorf(CodeMalformed, "envelope has no type")
	}
	v, err := jsonInt(raw, "type", 0, math.MaxUint16)
	if err != nil {
		return env, err
	}
	env.Type = MessageType(v)
	if raw, ok := header["conversationId"]; ok {
		if err := json.Unmarshal(raw, &env.ConversationID); err != nil {
			return env, errorf(CodeMalformed, "conversationId must be a string")
		}
	}
	if raw, ok := header["meta"]; ok {
		m, err := jsonValue(raw)
		if err != nil {
			return env, errorf(CodeMalformed, "meta: %v", err)
		}
		switch m := m.(type) {
		case nil:
		case map[string]any:
			if _, err := normalizeAny(m, "meta"); err != nil {
				return env, errorf(CodeMalformed, "%v", err)
			}
			if len(m) > 0 {
				env.Meta = m
			}
		default:
			return env, errorf(CodeMalformed, "meta must be an object")
		}
	}
	rawBody, ok := header["body"]
	if !ok {
		return env, errorf(CodeMalformed, "envelope has no body")
	}
	generic, err := jsonValue(rawBody)
	if err != nil {
		return env, errorf(CodeMalformed, "body: %v", err)
	}
	if _, ok := generic.(map[string]any); !ok {
		return env, errorf(CodeMalformed, "body must be an object")
	}
	schema, ok := set.bodies[env.Type]
	if !ok {
		return env, errorf(CodeUnknownType, "unknown message type %d", env.Type)
	}
	dropNullOptionals(schema, generic, 0)
	if err := schema.Validate(generic); err != nil {
		return env, &Error{Code: CodeInvalidBody, Reason: schemaReason("body", err)}
	}
	b := NewBody(env.Type)
	dec := json.NewDecoder(bytes.NewReader(rawBody))
	dec.UseNumber()
	if err := dec.Decode(b); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return env, errorf(CodeInvalidBody, "body/%s: %v", ute.Field, err)
		}
		return env, errorf(CodeInvalidBody, "body: %v", err)
	}
	if err := normalizeValue(reflect.ValueOf(b), false, "body"); err != nil {
		return env, errorf(CodeInvalidBody, "%v", err)
	}
	env.Body = b
	return env, nil
}

// jsonValue decodes one JSON value keeping numbers exact (json.Number).
func jsonValue(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

func jsonInt(raw json.RawMessage, k string, lo, hi int64) (int64, error) {
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, errorf(CodeMalformed, "%s must be an integer", k)
	}
	v, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		return 0, errorf(CodeMalformed, "%s must be an integer", k)
	}
	if v < lo || v > hi {
		return 0, errorf(CodeMalformed, "%s %d out of range [%d, %d]", k, v, lo, hi)
	}
	return v, nil
}

// EncodeJSON writes the JSON form of env: the canonical MessagePack form
// read back as JSON, so both forms always carry the same values. Object
// keys come out sorted, bytes as padded standard base64.
func EncodeJSON(env Envelope) ([]byte, error) {
	data, err := Encode(env)
	if err != nil {
		return nil, err
	}
	return msgpackToJSON(data)
}

func msgpackToJSON(data []byte) ([]byte, error) {
	br := bytes.NewReader(data)
	r := &reader{dec: msgpack.NewDecoder(br), br: br, keepBin: true}
	v, err := r.value("envelope", 0)
	if err != nil {
		return nil, fmt.Errorf("protocol: %w", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("protocol: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// MarshalJSON implements json.Marshaler with EncodeJSON.
func (env Envelope) MarshalJSON() ([]byte, error) { return EncodeJSON(env) }

// UnmarshalJSON implements json.Unmarshaler with DecodeJSON.
func (env *Envelope) UnmarshalJSON(data []byte) error {
	e, err := DecodeJSON(data)
	if err != nil {
		return err
	}
	*env = e
	return nil
}
