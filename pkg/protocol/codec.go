package protocol

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

type decodeState struct {
	keys [][]byte
	br   bytes.Reader
	dec  *msgpack.Decoder // header and pass A
	bbr  bytes.Reader
	body *msgpack.Decoder // typed body
}

var decodePool = sync.Pool{New: func() any {
	s := &decodeState{dec: msgpack.NewDecoder(nil), body: msgpack.NewDecoder(nil)}
	s.body.SetCustomStructTag("json")
	s.body.UseLooseInterfaceDecoding(true)
	return s
}}

// Decode parses untrusted canonical (or any well-formed) MessagePack into an
// Envelope. Errors are *Error: 104 too large; 101 not a well-formed
// MessagePack map, trailing bytes, header fields of the wrong type, missing
// type or body; 102 unknown type; 103 body not valid for its schema.
func Decode(data []byte) (Envelope, error) {
	var env Envelope
	set, err := loadSchemas()
	if err != nil {
		return env, &Error{Code: CodeInternal, Reason: err.Error()}
	}
	return decodeWith(set, data)
}

func decodeWith(set *schemaSet, data []byte) (Envelope, error) {
	var env Envelope
	if len(data) > MaxEnvelopeSize {
		return env, errorf(CodeTooLarge, "envelope is %d bytes, limit %d", len(data), MaxEnvelopeSize)
	}
	if len(data) > 0 { // empty: "not a MessagePack map" below
		if err := checkWellFormed(data); err != nil {
			return env, errorf(CodeMalformed, "%v", err)
		}
	}
	st := decodePool.Get().(*decodeState)
	defer func() {
		st.dec.ResetReader(nil)
		st.body.ResetReader(nil)
		decodePool.Put(st)
	}()
	st.br.Reset(data)
	st.dec.ResetReader(&st.br)
	r := &reader{dec: st.dec, br: &st.br}

	n, err := st.dec.DecodeMapLen()
	if err != nil || n < 0 {
		return env, errorf(CodeMalformed, "envelope is not a MessagePack map")
	}
	if n, err = r.length("envelope", n, nil); err != nil {
		return env, errorf(CodeMalformed, "%v", err)
	}
	var (
		seen               uint8
		bodyStart, bodyEnd int
	)
	for range n {
		k, err := r.key("envelope")
		if err != nil {
			return env, errorf(CodeMalformed, "%v", err)
		}
		bit := headerBit(k)
		if bit != 0 && seen&bit != 0 {
			return env, errorf(CodeMalformed, "duplicate envelope field %s", k)
		}
		seen |= bit
		switch k {
		case "stanzaId":
			if nilNext(r) {
				continue
			}
			v, err := headerInt(st.dec, k, math.MinInt32, math.MaxInt32)
			if err != nil {
				return env, err
			}
			env.StanzaID = int32(v)
		case "type":
			v, err := headerInt(st.dec, k, 0, math.MaxUint16)
			if err != nil {
				return env, err
			}
			env.Type = MessageType(v)
		case "conversationId":
			v, err := r.value(k, 1)
			if err == nil && v == nil {
				continue // nil: absent
			}
			s, ok := v.(string)
			if err != nil || !ok {
				return env, errorf(CodeMalformed, "conversationId must be a UTF-8 string")
			}
			env.ConversationID = s
		case "meta":
			v, err := r.value("meta", 1)
			if err != nil {
				return env, errorf(CodeMalformed, "%v", err)
			}
			switch m := v.(type) {
			case nil:
			case map[string]any:
				if len(m) > 0 {
					env.Meta = m
				}
			default:
				return env, errorf(CodeMalformed, "meta must be a map")
			}
		case "body":
			c, err := st.dec.PeekCode()
			if err != nil || !(msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32) {
				return env, errorf(CodeMalformed, "body must be a map")
			}
			bodyStart = len(data) - st.br.Len()
			if err := st.dec.Skip(); err != nil {
				return env, errorf(CodeMalformed, "body: %v", err)
			}
			bodyEnd = len(data) - st.br.Len()
		default:
			if err := st.dec.Skip(); err != nil {
				return env, errorf(CodeMalformed, "%s: %v", k, err)
			}
		}
	}
	if st.br.Len() != 0 {
		return env, errorf(CodeMalformed, "%d trailing bytes after the envelope", st.br.Len())
	}
	if seen&bitType == 0 {
		return env, errorf(CodeMalformed, "envelope has no type")
	}
	if seen&bitBody == 0 {
		return env, errorf(CodeMalformed, "envelope has no body")
	}
	if !env.Type.Known() {
		return env, errorf(CodeUnknownType, "unknown message type %d", env.Type)
	}
	raw := data[bodyStart:bodyEnd]
	if err := st.validateBody(set, env.Type, raw); err != nil {
		return env, err
	}
	b := NewBody(env.Type)
	st.bbr.Reset(raw)
	st.body.ResetReader(&st.bbr)
	if err := st.body.Decode(b); err != nil {
		return env, errorf(CodeInvalidBody, "body: %v", err)
	}
	if err := normalizeValue(reflect.ValueOf(b), false, "body"); err != nil {
		return env, errorf(CodeInvalidBody, "%v", err)
	}
	env.Body = b
	return env, nil
}

const (
	bitStanza uint8 = 1 << iota
	bitCID
	bitType
	bitMeta
	bitBody
)

func headerBit(k string) uint8 {
	switch k {
	case "stanzaId":
		return bitStanza
	case "conversationId":
		return bitCID
	case "type":
		return bitType
	case "meta":
		return bitMeta
	case "body":
		return bitBody
	}
	return 0
}

// nilNext consumes the next value if it is nil and reports whether it was.
func nilNext(r *reader) bool {
	if c, err := r.dec.PeekCode(); err != nil || c != msgpcode.Nil {
		return false
	}
	return r.dec.Skip() == nil
}

func headerInt(dec *msgpack.Decoder, k string, lo, hi int64) (int64, error) {
	c, err := dec.PeekCode()
	if err != nil {
		return 0, errorf(CodeMalformed, "%s: %v", k, err)
	}
	isInt := msgpcode.IsFixedNum(c) || (c >= msgpcode.Uint8 && c <= msgpcode.Int64)
	if !isInt {
		return 0, errorf(CodeMalformed, "%s must be an integer", k)
	}
	if c == msgpcode.Uint64 {
		u, err := dec.DecodeUint64()
		if err != nil || u > uint64(hi) {
			return 0, errorf(CodeMalformed, "%s out of range", k)
		}
		return int64(u), nil
	}
	v, err := dec.DecodeInt64()
	if err != nil {
		return 0, errorf(CodeMalformed, "%s: %v", k, err)
	}
	if v < lo || v > hi {
		return 0, errorf(CodeMalformed, "%s %d out of range [%d, %d]", k, v, lo, hi)
	}
	return v, nil
}

type encodeState struct {
	buf bytes.Buffer
	enc *msgpack.Encoder
}

var encodePool = sync.Pool{New: func() any {
	s := &encodeState{}
	s.enc = msgpack.NewEncoder(&s.buf)
	return s
}}

// Encode writes env in the canonical MessagePack form. It does not validate
// the body against its schema (see Validate).
func Encode(env Envelope) ([]byte, error) {
	if env.Body == nil {
		return nil, fmt.Errorf("protocol: encode: envelope has no body")
	}
	if bt := env.Body.MessageType(); bt != env.Type {
		return nil, fmt.Errorf("protocol: encode: envelope type %s does not match body %T", env.Type, env.Body)
	}
	st := encodePool.Get().(*encodeState)
	defer encodePool.Put(st)
	st.buf.Reset()
	enc := st.enc
	n := 2
	if env.ConversationID != "" {
		n++
	}
	if len(env.Meta) > 0 {
		n++
	}
	if env.StanzaID != 0 {
		n++
	}
	if err := enc.EncodeMapLen(n); err != nil {
		return nil, err
	}
	// Keys in bytewise order: body, conversationId, meta, stanzaId, type.
	if err := enc.EncodeString("body"); err != nil {
		return nil, err
	}
	bv := reflect.ValueOf(env.Body)
	if bv.Kind() == reflect.Pointer && bv.IsNil() {
		return nil, fmt.Errorf("protocol: encode: nil %T body", env.Body)
	}
	if err := encodeValue(enc, bv, "body"); err != nil {
		return nil, err
	}
	if env.ConversationID != "" {
		_ = enc.EncodeString("conversationId")
		_ = enc.EncodeString(env.ConversationID)
	}
	if len(env.Meta) > 0 {
		_ = enc.EncodeString("meta")
		if err := encodeAnyMap(enc, env.Meta, "meta"); err != nil {
			return nil, err
		}
	}
	if env.StanzaID != 0 {
		_ = enc.EncodeString("stanzaId")
		_ = enc.EncodeInt(int64(env.StanzaID))
	}
	_ = enc.EncodeString("type")
	_ = enc.EncodeUint(uint64(env.Type))
	return bytes.Clone(st.buf.Bytes()), nil
}

// Validate reports whether env would be accepted by Decode after encoding.
func Validate(env Envelope) error {
	data, err := Encode(env)
	if err != nil {
		return &Error{Code: CodeInvalidBody, Reason: err.Error()}
	}
	_, err = Decode(data)
	return err
}

// validateBody checks a body (a well-formed MessagePack map) against the
// schema of t: with the compiled fast validator when the schema allows it,
// otherwise by building the JSON tree and running the full validator.
func (st *decodeState) validateBody(set *schemaSet, t MessageType, raw []byte) error {
	st.bbr.Reset(raw)
	st.body.ResetReader(&st.bbr)
	r := &reader{dec: st.body, br: &st.bbr, raw: raw, rawKeys: st.keys[:0]}
	defer func() { st.keys = r.rawKeys[:0] }()
	if n := set.fast[t]; n != nil {
		if err := r.check(n, 0); err != nil {
			return bodyError(under(err, "body"))
		}
		return nil
	}
	r.binTop = true
	body, err := r.object("body", 0, true)
	if err != nil {
		return bodyError(err)
	}
	dropNullOptionals(set.bodies[t], body, 0)
	bytesFields := set.bytesFields[t]
	for _, k := range r.binKeys {
		if !slices.Contains(bytesFields, k) {
			return errorf(CodeInvalidBody, "body/%s: binary data is only allowed in bytes fields", k)
		}
	}
	for _, k := range bytesFields {
		if _, present := body[k]; present && !slices.Contains(r.binKeys, k) {
			return errorf(CodeInvalidBody, "body/%s: must be MessagePack bin", k)
		}
	}
	if err := set.bodies[t].Validate(body); err != nil {
		return &Error{Code: CodeInvalidBody, Reason: schemaReason("body", err)}
	}
	return nil
}

func bodyError(err error) *Error {
	if we, ok := err.(*walkError); ok && we.malformed {
		return errorf(CodeMalformed, "%v", we)
	}
	return errorf(CodeInvalidBody, "%v", err)
}
