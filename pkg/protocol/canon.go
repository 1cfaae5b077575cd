package protocol

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// The canonical MessagePack writer (proto-schemas/README.md): map keys in
// bytewise order at every level, struct fields included; optional fields
// omitted when absent; integers in their smallest form; integral numbers as
// integers, other numbers as float64; bytes as bin, strings as str.

type fieldPlan struct {
	name      string
	index     int
	omitEmpty bool
}

// structPlan is the cached, key-sorted field list of a body struct type.
type structPlan struct {
	fields []fieldPlan
	// normalize is set when decoded values of the type need normalizing:
	// it holds free-form values or optional slices and maps somewhere.
	normalize bool
}

var plans sync.Map // reflect.Type -> *structPlan

func planOf(t reflect.Type) *structPlan {
	if p, ok := plans.Load(t); ok {
		return p.(*structPlan)
	}
	p := &structPlan{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		fp := fieldPlan{name: name, index: i, omitEmpty: strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")}
		p.fields = append(p.fields, fp)
		if needsNormalize(f.Type, fp.omitEmpty, 0) {
			p.normalize = true
		}
	}
	slices.SortFunc(p.fields, func(a, b fieldPlan) int { return strings.Compare(a.name, b.name) })
	actual, _ := plans.LoadOrStore(t, p)
	return actual.(*structPlan)
}

func needsNormalize(t reflect.Type, optional bool, depth int) bool {
	if depth > 8 {
		return false
	}
	switch t.Kind() {
	case reflect.Interface:
		return true
	case reflect.Pointer:
		return needsNormalize(t.Elem(), false, depth+1)
	case reflect.Slice, reflect.Map:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			return false // bytes: bin in, bin out
		}
		return optional || needsNormalize(t.Elem(), false, depth+1)
	case reflect.Struct:
		return planOf(t).normalize
	}
	return false
}

func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		return v.IsNil()
	case reflect.Slice, reflect.Map, reflect.String, reflect.Array:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	}
	return false
}

func encodeFloat(enc *msgpack.Encoder, f float64, path string) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("protocol: %s: NaN or infinite number", path)
	}
	if f == math.Trunc(f) && math.Abs(f) <= maxSafeInteger {
		return enc.EncodeInt(int64(f))
	}
	return enc.EncodeFloat64(f)
}

// encodeValue writes v canonically.
func encodeValue(enc *msgpack.Encoder, v reflect.Value, path string) error {
	switch v.Kind() {
	case reflect.Invalid:
		return enc.EncodeNil()
	case reflect.Pointer:
		if v.IsNil() {
			return enc.EncodeNil()
		}
		return encodeValue(enc, v.Elem(), path)
	case reflect.Interface:
		if v.IsNil() {
			return enc.EncodeNil()
		}
		return encodeAny(enc, v.Elem().Interface(), path)
	case reflect.Struct:
		return encodeStruct(enc, v, path)
	case reflect.Map:
		return encodeMap(enc, v, path)
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if v.Kind() == reflect.Slice {
				return enc.EncodeBytes(nonNilBytes(v.Bytes()))
			}
			b := make([]byte, v.Len())
			reflect.Copy(reflect.ValueOf(b), v)
			return enc.EncodeBytes(b)
		}
		if err := enc.EncodeArrayLen(v.Len()); err != nil {
			return err
		}
		for i := range v.Len() {
			if err := encodeValue(enc, v.Index(i), path+"/"+strconv.Itoa(i)); err != nil {
				return err
			}
		}
		return nil
	case reflect.String:
		return enc.EncodeString(v.String())
	case reflect.Bool:
		return enc.EncodeBool(v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return enc.EncodeInt(v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return enc.EncodeUint(v.Uint())
	case reflect.Float32, reflect.Float64:
		return encodeFloat(enc, v.Float(), path)
	}
	return fmt.Errorf("protocol: %s: cannot encode %s", path, v.Type())
}

func nonNilBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func encodeStruct(enc *msgpack.Encoder, v reflect.Value, path string) error {
	p := planOf(v.Type())
	n := 0
	for _, f := range p.fields {
		if !f.omitEmpty || !isEmpty(v.Field(f.index)) {
			n++
		}
	}
	if err := enc.EncodeMapLen(n); err != nil {
		return err
	}
	for _, f := range p.fields {
		fv := v.Field(f.index)
		if f.omitEmpty && isEmpty(fv) {
			continue
		}
		if err := enc.EncodeString(f.name); err != nil {
			return err
		}
		if fv.Kind() == reflect.Map && fv.IsNil() {
			fv = reflect.MakeMap(fv.Type()) // a required map is written as {}
		}
		if fv.Kind() == reflect.Slice && fv.IsNil() && fv.Type().Elem().Kind() != reflect.Uint8 {
			if err := enc.EncodeArrayLen(0); err != nil {
				return err
			}
			continue
		}
		if err := encodeValue(enc, fv, path+"/"+f.name); err != nil {
			return err
		}
	}
	return nil
}

func encodeMap(enc *msgpack.Encoder, v reflect.Value, path string) error {
	if v.Type().Key().Kind() != reflect.String {
		return fmt.Errorf("protocol: %s: map keys must be strings, not %s", path, v.Type().Key())
	}
	if m, ok := v.Interface().(map[string]any); ok {
		return encodeAnyMap(enc, m, path)
	}
	keys := make([]string, 0, v.Len())
	for _, k := range v.MapKeys() {
		keys = append(keys, k.String())
	}
	slices.Sort(keys)
	if err := enc.EncodeMapLen(len(keys)); err != nil {
		return err
	}
	for _, k := range keys {
		if err := enc.EncodeString(k); err != nil {
			return err
		}
		if err := encodeValue(enc, v.MapIndex(reflect.ValueOf(k).Convert(v.Type().Key())), path+"/"+k); err != nil {
			return err
		}
	}
	return nil
}

func encodeAnyMap(enc *msgpack.Encoder, m map[string]any, path string) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if err := enc.EncodeMapLen(len(keys)); err != nil {
		return err
	}
	for _, k := range keys {
		if err := enc.EncodeString(k); err != nil {
			return err
		}
		if err := encodeAny(enc, m[k], path+"/"+k); err != nil {
			return err
		}
	}
	return nil
}

// encodeAny writes a free-form (JSON data model) value; other Go values go
// through reflection. Bytes are refused: outside bytes fields they would not
// survive the JSON form.
func encodeAny(enc *msgpack.Encoder, x any, path string) error {
	switch x := x.(type) {
	case nil:
		return enc.EncodeNil()
	case string:
		return enc.EncodeString(x)
	case bool:
		return enc.EncodeBool(x)
	case int64:
		return enc.EncodeInt(x)
	case int:
		return enc.EncodeInt(int64(x))
	case int32:
		return enc.EncodeInt(int64(x))
	case uint64:
		return enc.EncodeUint(x)
	case float64:
		return encodeFloat(enc, x, path)
	case json.Number:
		v, err := normalizeAny(x, path)
		if err != nil {
			return err
		}
		return encodeAny(enc, v, path)
	case map[string]any:
		return encodeAnyMap(enc, x, path)
	case []any:
		if err := enc.EncodeArrayLen(len(x)); err != nil {
			return err
		}
		for i, e := range x {
			if err := encodeAny(enc, e, path+"/"+strconv.Itoa(i)); err != nil {
				return err
			}
		}
		return nil
	case []byte:
		return fmt.Errorf("protocol: %s: bytes are only allowed in bytes fields", path)
	}
	return encodeValue(enc, reflect.ValueOf(x), path)
}

// maxSafeInteger (2^53-1) bounds the floats written as integers: beyond it
// JavaScript encoders write float64, and so do we.
const maxSafeInteger = 1<<53 - 1
