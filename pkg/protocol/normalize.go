package protocol

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
)

// Decoded values are normalized so that an envelope decoded from either
// form equals the envelope decoded from its canonical re-encoding: free-form
// numbers become int64 (integral), uint64 (integral above MaxInt64) or
// float64 (non-integral), and empty optional arrays and maps become nil,
// since the canonical form omits them.

// normalizeAny returns the canonical JSON-model form of a free-form value.
func normalizeAny(x any, path string) (any, error) {
	switch x := x.(type) {
	case nil, bool, string, int64:
		return x, nil
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x), nil
		}
		return x, nil
	case int:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case uint:
		return normalizeAny(uint64(x), path)
	case uint8:
		return int64(x), nil
	case uint16:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case float32:
		return normalizeAny(float64(x), path)
	case float64:
		v, err := canonicalFloat(path, x)
		if err != nil {
			return nil, err
		}
		return v, nil
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i, nil
		}
		if u, err := strconv.ParseUint(string(x), 10, 64); err == nil {
			return u, nil
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return nil, &walkError{path: path, msg: "number out of range"}
		}
		return normalizeAny(f, path)
	case []any:
		for i, e := range x {
			v, err := normalizeAny(e, path+"/"+strconv.Itoa(i))
			if err != nil {
				return nil, err
			}
			x[i] = v
		}
		return x, nil
	case map[string]any:
		for k, e := range x {
			v, err := normalizeAny(e, path+"/"+k)
			if err != nil {
				return nil, err
			}
			x[k] = v
		}
		return x, nil
	}
	return nil, &walkError{path: path, msg: fmt.Sprintf("unsupported value of type %T", x)}
}

// normalizeValue normalizes a decoded typed value in place.
func normalizeValue(v reflect.Value, optional bool, path string) error {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			return normalizeValue(v.Elem(), false, path)
		}
	case reflect.Interface:
		if !v.IsNil() {
			n, err := normalizeAny(v.Elem().Interface(), path)
			if err != nil {
				return err
			}
			if n == nil {
				v.SetZero()
			} else {
				v.Set(reflect.ValueOf(n))
			}
		}
	case reflect.Struct:
		p := planOf(v.Type())
		if !p.normalize {
			return nil
		}
		for _, f := range p.fields {
			if err := normalizeValue(v.Field(f.index), f.omitEmpty, path+"/"+f.name); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return nil
		}
		if optional && v.Len() == 0 {
			v.SetZero()
			return nil
		}
		for i := range v.Len() {
			if err := normalizeValue(v.Index(i), false, path+"/"+strconv.Itoa(i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		if optional && v.Len() == 0 {
			v.SetZero()
			return nil
		}
		if v.Type().Elem().Kind() != reflect.Interface {
			return nil
		}
		iter := v.MapRange()
		for iter.Next() {
			n, err := normalizeAny(iter.Value().Interface(), path+"/"+iter.Key().String())
			if err != nil {
				return err
			}
			if n == nil {
				v.SetMapIndex(iter.Key(), reflect.Zero(v.Type().Elem()))
			} else {
				v.SetMapIndex(iter.Key(), reflect.ValueOf(n))
			}
		}
	}
	return nil
}
