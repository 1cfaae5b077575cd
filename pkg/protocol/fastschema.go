package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// The hot path (Decode) checks a body against its schema while walking the
// MessagePack bytes, without building a JSON tree: a compiled node per
// schema, supporting exactly the keywords proto-schemas uses. A schema using
// any other keyword is not compiled, and Decode then falls back to the full
// validator (santhosh-tekuri/jsonschema) for that type. Tests and FuzzDecode
// check that both validators agree.

const (
	tNull = 1 << iota
	tBool
	tInteger
	tNumber
	tString
	tArray
	tObject
)

type node struct {
	types      uint8 // allowed JSON types; 0 = any
	props      map[string]*node
	required   []string
	additional *node // schema for other properties; nil = any value
	items      *node // nil = any value
	enum       []string
	min, max   *float64
	bytes      bool // contentEncoding base64: bin in MessagePack
	// optional marks a declared, not required property: nil there means
	// absent (JavaScript and Kotlin clients send null for unset fields).
	optional bool
}

// anyNode accepts any JSON value.
var anyNode = &node{}

var annotationKeywords = map[string]bool{
	"$schema": true, "$id": true, "title": true, "description": true, "$comment": true,
	"goJSONSchema": true, "examples": true, "$defs": true,
}

// compileFast compiles a schema document, or reports why it cannot.
func compileFast(raw []byte) (*node, error) {
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	defs, _ := doc["$defs"].(map[string]any)
	return compileNode(doc, defs, 0)
}

func compileNode(s map[string]any, defs map[string]any, depth int) (*node, error) {
	if depth > 16 {
		return nil, fmt.Errorf("schema nesting too deep")
	}
	if ref, ok := s["$ref"].(string); ok {
		if len(s) != 1 && !(len(s) == 2 && s["description"] != nil) {
			return nil, fmt.Errorf("$ref with sibling keywords")
		}
		name, ok := strings.CutPrefix(ref, "#/$defs/")
		def, _ := defs[name].(map[string]any)
		if !ok || def == nil {
			return nil, fmt.Errorf("unsupported $ref %q", ref)
		}
		return compileNode(def, defs, depth+1)
	}
	n := &node{}
	for k, v := range s {
		switch {
		case annotationKeywords[k] || strings.HasPrefix(k, "x-"):
		case k == "type":
			ts, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("type must be one string")
			}
			bit := map[string]uint8{"null": tNull, "boolean": tBool, "integer": tInteger, "number": tNumber | tInteger,
				"string": tString, "array": tArray, "object": tObject}[ts]
			if bit == 0 {
				return nil, fmt.Errorf("unknown type %q", ts)
			}
			n.types = bit
		case k == "properties":
			props, _ := v.(map[string]any)
			n.props = map[string]*node{}
			for name, ps := range props {
				m, ok := ps.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("property %s: boolean schemas unsupported", name)
				}
				c, err := compileNode(m, defs, depth+1)
				if err != nil {
					return nil, fmt.Errorf("property %s: %w", name, err)
				}
				n.props[name] = c
			}
		case k == "required":
			for _, r := range v.([]any) {
				n.required = append(n.required, r.(string))
			}
		case k == "additionalProperties" || k == "items":
			m, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s must be a schema object", k)
			}
			c, err := compileNode(m, defs, depth+1)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			if k == "items" {
				n.items = c
			} else {
				n.additional = c
			}
		case k == "enum":
			for _, e := range v.([]any) {
				es, ok := e.(string)
				if !ok {
					return nil, fmt.Errorf("non-string enum")
				}
				n.enum = append(n.enum, es)
			}
		case k == "minimum" || k == "maximum":
			f, ok := v.(float64)
			if !ok {
				return nil, fmt.Errorf("%s must be a number", k)
			}
			if k == "minimum" {
				n.min = &f
			} else {
				n.max = &f
			}
		case k == "contentEncoding":
			if v != "base64" {
				return nil, fmt.Errorf("contentEncoding %v", v)
			}
			n.bytes = true
		default:
			return nil, fmt.Errorf("unsupported keyword %q", k)
		}
	}
	if len(n.required) > 64 {
		return nil, fmt.Errorf("more than 64 required properties")
	}
	for name, c := range n.props {
		c.optional = !slices.Contains(n.required, name)
	}
	if n.bytes && n.types != tString {
		return nil, fmt.Errorf("contentEncoding needs type string")
	}
	return n, nil
}

func invalid(format string, args ...any) *walkError {
	return &walkError{msg: fmt.Sprintf(format, args...)}
}

// under prefixes the error's path with one more outer segment; paths are
// built only when something fails, keeping the happy path allocation-free.
func under(err error, seg string) error {
	if we, ok := err.(*walkError); ok {
		if we.path == "" {
			we.path = seg
		} else {
			we.path = seg + "/" + we.path
		}
	}
	return err
}

// rawString reads a str without copying: the bytes alias the input.
func (r *reader) rawString() ([]byte, error) {
	c, err := r.br.ReadByte()
	if err != nil {
		return nil, malformed("", err)
	}
	var n int
	switch {
	case msgpcode.IsFixedString(c):
		n = int(c & msgpcode.FixedStrMask)
	case c == msgpcode.Str8 || c == msgpcode.Str16 || c == msgpcode.Str32:
		size := map[byte]int{msgpcode.Str8: 1, msgpcode.Str16: 2, msgpcode.Str32: 4}[c]
		for range size {
			b, err := r.br.ReadByte()
			if err != nil {
				return nil, malformed("", err)
			}
			n = n<<8 | int(b)
		}
	default:
		return nil, invalid("got MessagePack type 0x%02x, want string", c)
	}
	if n > r.br.Len() {
		return nil, &walkError{msg: "string longer than the remaining input", malformed: true}
	}
	pos := len(r.raw) - r.br.Len()
	if _, err := r.br.Seek(int64(n), io.SeekCurrent); err != nil {
		return nil, malformed("", err)
	}
	return r.raw[pos : pos+n : pos+n], nil
}

// check validates the next MessagePack value against n and consumes it.
// r.raw must be the input r.br reads.
func (r *reader) check(n *node, depth int) error {
	c, err := r.dec.PeekCode()
	if err != nil {
		return malformed("", err)
	}
	var got uint8
	switch {
	case c == msgpcode.Nil:
		if n.optional {
			return r.wrap("", r.dec.Skip())
		}
		got = tNull
	case c == msgpcode.True || c == msgpcode.False:
		got = tBool
	case msgpcode.IsFixedNum(c) || (c >= msgpcode.Uint8 && c <= msgpcode.Int64):
		got = tInteger
	case c == msgpcode.Float || c == msgpcode.Double:
		got = tNumber
	case msgpcode.IsString(c):
		got = tString
	case msgpcode.IsBin(c):
		if !n.bytes {
			return invalid("binary data is only allowed in bytes fields")
		}
		if err := r.dec.Skip(); err != nil {
			return malformed("", err)
		}
		return nil
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		got = tArray
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		got = tObject
	default:
		return invalid("unsupported MessagePack type 0x%02x", c)
	}
	if n.bytes {
		return invalid("must be MessagePack bin")
	}
	if n.types != 0 && n.types&got == 0 {
		return invalid("got %s, want %s", typeName(got), typeName(n.types))
	}
	switch got {
	case tNull, tBool:
		return r.wrap("", r.dec.Skip())
	case tInteger, tNumber:
		return r.checkNumber(n, c)
	case tString:
		s, err := r.rawString()
		if err != nil {
			return err
		}
		if !utf8.Valid(s) {
			return invalid("string is not valid UTF-8")
		}
		if n.enum != nil && !slices.Contains(n.enum, string(s)) {
			return invalid("value %q is not one of %q", s, n.enum)
		}
		return nil
	case tArray:
		if depth >= maxDepth {
			return invalid("nesting deeper than %d", maxDepth)
		}
		l, err := r.dec.DecodeArrayLen()
		if l, err = r.length("", l, err); err != nil {
			return err
		}
		items := n.items
		if items == nil {
			items = anyNode
		}
		for i := range l {
			if err := r.check(items, depth+1); err != nil {
				return under(err, strconv.Itoa(i))
			}
		}
		return nil
	default:
		return r.checkObject(n, depth)
	}
}

func (r *reader) checkNumber(n *node, c byte) error {
	var f float64
	switch {
	case c == msgpcode.Uint64:
		u, err := r.dec.DecodeUint64()
		if err != nil {
			return malformed("", err)
		}
		f = float64(u)
	case c == msgpcode.Float || c == msgpcode.Double:
		v, err := r.dec.DecodeFloat64()
		if err != nil {
			return malformed("", err)
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return invalid("number is NaN or infinite")
		}
		f = v
	default:
		v, err := r.dec.DecodeInt64()
		if err != nil {
			return malformed("", err)
		}
		f = float64(v)
	}
	if n.min != nil && f < *n.min {
		return invalid("minimum: got %v, want %v", f, *n.min)
	}
	if n.max != nil && f > *n.max {
		return invalid("maximum: got %v, want %v", f, *n.max)
	}
	return nil
}

func (r *reader) checkObject(n *node, depth int) error {
	if depth >= maxDepth {
		return invalid("nesting deeper than %d", maxDepth)
	}
	l, err := r.dec.DecodeMapLen()
	if l, err = r.length("", l, err); err != nil {
		return err
	}
	// r.rawKeys is a stack shared by nested objects: this object's keys are
	// r.rawKeys[base:] until it returns.
	base := len(r.rawKeys)
	defer func() { r.rawKeys = r.rawKeys[:base] }()
	var found uint64 // bit i: required[i] present
	for range l {
		c, err := r.dec.PeekCode()
		if err != nil {
			return malformed("", err)
		}
		if !msgpcode.IsString(c) {
			return invalid("map key is not a string (0x%02x)", c)
		}
		k, err := r.rawString()
		if err != nil {
			return err
		}
		if !utf8.Valid(k) {
			return invalid("map key is not valid UTF-8")
		}
		for _, prev := range r.rawKeys[base:] {
			if bytes.Equal(prev, k) {
				return under(invalid("duplicate key"), string(k))
			}
		}
		r.rawKeys = append(r.rawKeys, k)
		child := n.props[string(k)]
		if child == nil {
			child = n.additional
		}
		if child == nil {
			child = anyNode
		}
		for i, req := range n.required {
			if req == string(k) {
				found |= 1 << i
			}
		}
		if err := r.check(child, depth+1); err != nil {
			return under(err, string(k))
		}
	}
	for i, req := range n.required {
		if found&(1<<i) == 0 {
			return invalid("missing required property %q", req)
		}
	}
	return nil
}

func typeName(t uint8) string {
	var names []string
	for bit, name := range []string{"null", "boolean", "integer", "number", "string", "array", "object"} {
		if t&(1<<bit) != 0 && !(bit == 2 && t&tNumber != 0) {
			names = append(names, name)
		}
	}
	return strings.Join(names, " or ")
}
