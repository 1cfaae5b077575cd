package protocol

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// maxDepth bounds nesting of untrusted maps and arrays.
const maxDepth = 32

// walkError is a problem found while reading untrusted MessagePack:
// malformed means the bytes are not well-formed MessagePack (101); otherwise
// the value cannot stand in the JSON data model (an invalid body, 103).
type walkError struct {
	path      string
	msg       string
	malformed bool
}

func (e *walkError) Error() string {
	if e.path == "" {
		return e.msg
	}
	return e.path + ": " + e.msg
}

// reader turns untrusted MessagePack into JSON data model values:
// nil, bool, int64, uint64 (only above MaxInt64), float64 (only non-integral),
// string, []any, map[string]any. The result feeds the schema validator.
type reader struct {
	dec *msgpack.Decoder
	br  *bytes.Reader
	// binKeys collects top-level keys whose value was bin, when binTop is set;
	// bin elsewhere is rejected. Their value reads as "" (schemas only say
	// string + contentEncoding base64 there).
	binTop  bool
	binKeys []string
	// keepBin reads bin anywhere as []byte (trusted input, for EncodeJSON).
	keepBin bool
	// raw is the input br reads (for check's zero-copy strings), rawKeys
	// scratch space for its duplicate-key checks.
	raw     []byte
	rawKeys [][]byte
}

func malformed(path string, err error) *walkError {
	return &walkError{path: path, msg: err.Error(), malformed: true}
}

func (r *reader) value(path string, depth int) (any, error) {
	c, err := r.dec.PeekCode()
	if err != nil {
		return nil, malformed(path, err)
	}
	switch {
	case c == msgpcode.Nil:
		return nil, r.wrap(path, r.dec.DecodeNil())
	case c == msgpcode.True || c == msgpcode.False:
		v, err := r.dec.DecodeBool()
		return v, r.wrap(path, err)
	case msgpcode.IsFixedNum(c) || c == msgpcode.Int8 || c == msgpcode.Int16 || c == msgpcode.Int32 ||
		c == msgpcode.Int64 || c == msgpcode.Uint8 || c == msgpcode.Uint16 || c == msgpcode.Uint32:
		v, err := r.dec.DecodeInt64()
		return v, r.wrap(path, err)
	case c == msgpcode.Uint64:
		v, err := r.dec.DecodeUint64()
		if err != nil {
			return nil, malformed(path, err)
		}
		if v <= math.MaxInt64 {
			return int64(v), nil
		}
		return v, nil
	case c == msgpcode.Float || c == msgpcode.Double:
		v, err := r.dec.DecodeFloat64()
		if err != nil {
			return nil, malformed(path, err)
		}
		return canonicalFloat(path, v)
	case msgpcode.IsString(c):
		s, err := r.dec.DecodeString()
		if err != nil {
			return nil, malformed(path, err)
		}
		if !utf8.ValidString(s) {
			return nil, &walkError{path: path, msg: "string is not valid UTF-8"}
		}
		return s, nil
	case msgpcode.IsBin(c) && r.keepBin:
		v, err := r.dec.DecodeBytes()
		return v, r.wrap(path, err)
	case msgpcode.IsBin(c):
		return nil, &walkError{path: path, msg: "binary data is only allowed in bytes fields"}
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		return r.array(path, depth)
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		return r.object(path, depth, false)
	default:
		return nil, &walkError{path: path, msg: fmt.Sprintf("unsupported MessagePack type 0x%02x", c)}
	}
}

func (r *reader) wrap(path string, err error) error {
	if err != nil {
		return malformed(path, err)
	}
	return nil
}

// canonicalFloat rejects NaN and infinities and turns integral values into
// int64, as the canonical encoding writes them as integers.
func canonicalFloat(path string, v float64) (any, error) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil, &walkError{path: path, msg: "number is NaN or infinite"}
	}
	if v == math.Trunc(v) && math.Abs(v) <= maxSafeInteger {
		return int64(v), nil
	}
	return v, nil
}

// length checks a declared element count against the bytes left, so a
// forged count cannot make us allocate.
func (r *reader) length(path string, n int, err error) (int, error) {
	if err != nil {
		return 0, malformed(path, err)
	}
	if n > r.br.Len() {
		return 0, &walkError{path: path, msg: "length " + strconv.Itoa(n) + " exceeds the remaining input", malformed: true}
	}
	return n, nil
}

func (r *reader) array(path string, depth int) (any, error) {
	if depth >= maxDepth {
		return nil, &walkError{path: path, msg: "nesting deeper than " + strconv.Itoa(maxDepth)}
	}
	n, err := r.dec.DecodeArrayLen()
	if n, err = r.length(path, n, err); err != nil {
		return nil, err
	}
	out := make([]any, n)
	for i := range out {
		if out[i], err = r.value(path+"/"+strconv.Itoa(i), depth+1); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// object reads a map with string keys. top marks the body's own map, where
// bin values are recorded in binKeys when binTop is set.
func (r *reader) object(path string, depth int, top bool) (map[string]any, error) {
	if depth >= maxDepth {
		return nil, &walkError{path: path, msg: "nesting deeper than " + strconv.Itoa(maxDepth)}
	}
	n, err := r.dec.DecodeMapLen()
	if n, err = r.length(path, n, err); err != nil {
		return nil, err
	}
	out := make(map[string]any, n)
	for range n {
		k, err := r.key(path)
		if err != nil {
			return nil, err
		}
		if _, dup := out[k]; dup {
			return nil, &walkError{path: path + "/" + k, msg: "duplicate key"}
		}
		if top && r.binTop {
			if c, err := r.dec.PeekCode(); err == nil && msgpcode.IsBin(c) {
				if err := r.dec.Skip(); err != nil {
					return nil, malformed(path+"/"+k, err)
				}
				r.binKeys = append(r.binKeys, k)
				out[k] = ""
				continue
			}
		}
		if out[k], err = r.value(path+"/"+k, depth+1); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (r *reader) key(path string) (string, error) {
	c, err := r.dec.PeekCode()
	if err != nil {
		return "", malformed(path, err)
	}
	if !msgpcode.IsString(c) {
		return "", &walkError{path: path, msg: fmt.Sprintf("map key is not a string (0x%02x)", c)}
	}
	k, err := r.dec.DecodeString()
	if err != nil {
		return "", malformed(path, err)
	}
	if !utf8.ValidString(k) {
		return "", &walkError{path: path, msg: "map key is not valid UTF-8"}
	}
	return k, nil
}
