// Package config reads ALICIA_* settings into service Configs from a
// Source: the process environment (Environ), or values laid over another
// source (Source.Overlay), as `alicia up` gives the services it runs in its
// own process without touching the environment. Defaults stay in code;
// each helper overrides one field when its variable is set (an empty value
// is unset) and reports a parse error naming the variable, its value and
// the source it came from.
//
// A service reads its Config with ConfigFrom(src); its ConfigFromEnv, for
// its command, is ConfigFrom(config.Environ()). The package-level helpers
// (String, Int, …) read the environment, for code that has no source.
package config

import (
	"fmt"
	"maps"
	"os"
	"strconv"
	"strings"
	"time"
)

// Source is where settings are read from. The zero Source sets nothing:
// every helper keeps its default.
type Source struct {
	lookup func(name string) (string, bool)
	origin string
	under  *Source
}

// Environ is the process environment.
func Environ() Source {
	return Source{lookup: os.LookupEnv, origin: "the environment"}
}

// Lookup is a source whose values lookup returns, named origin in errors.
func Lookup(origin string, lookup func(name string) (string, bool)) Source {
	return Source{lookup: lookup, origin: origin}
}

// Overlay is values laid over s: a name values holds takes its value there,
// even an empty one (which unsets what s sets); any other falls through to
// s. origin names values in errors ("alicia up"). values is copied.
func (s Source) Overlay(origin string, values map[string]string) Source {
	m := maps.Clone(values)
	return Source{lookup: func(name string) (string, bool) { v, ok := m[name]; return v, ok }, origin: origin, under: &s}
}

// Lookup returns name's value and whether the source holds it.
func (s Source) Lookup(name string) (string, bool) {
	if s.lookup != nil {
		if v, ok := s.lookup(name); ok {
			return v, true
		}
	}
	if s.under != nil {
		return s.under.Lookup(name)
	}
	return "", false
}

// Get is name's value, "" when not set.
func (s Source) Get(name string) string {
	v, _ := s.Lookup(name)
	return v
}

// IsSet reports whether name has a value that is not empty.
func (s Source) IsSet(name string) bool { return s.Get(name) != "" }

// Origin names where name's value comes from: the layer that holds it.
func (s Source) Origin(name string) string {
	if s.lookup != nil {
		if _, ok := s.lookup(name); ok {
			return s.origin
		}
	}
	if s.under != nil {
		return s.under.Origin(name)
	}
	if s.origin == "" {
		return "no source"
	}
	return s.origin
}

// String sets *dst from name when it is set and not empty.
func (s Source) String(name string, dst *string) {
	if v := s.Get(name); v != "" {
		*dst = v
	}
}

// Secret sets *dst from name, or from the file named by name_FILE (trimmed),
// so secrets can come from mounted files instead of the environment.
func (s Source) Secret(name string, dst *string) error {
	if v := s.Get(name); v != "" {
		*dst = v
		return nil
	}
	f := s.SecretFile(name)
	if f == "" {
		return nil
	}
	b, err := os.ReadFile(f)
	if err != nil {
		return fmt.Errorf("%s_FILE from %s: %w", name, s.Origin(name+"_FILE"), err)
	}
	*dst = strings.TrimSpace(string(b))
	return nil
}

// SecretFile is the file Secret reads name from: name_FILE when name itself
// is not set, "" otherwise.
func (s Source) SecretFile(name string) string {
	if s.IsSet(name) {
		return ""
	}
	return s.Get(name + "_FILE")
}

// Int sets *dst from name.
func (s Source) Int(name string, dst *int) error {
	return parse(s, name, dst, strconv.Atoi)
}

// Float64 sets *dst from name.
func (s Source) Float64(name string, dst *float64) error {
	return parse(s, name, dst, func(v string) (float64, error) { return strconv.ParseFloat(v, 64) })
}

// Duration sets *dst from name (Go duration syntax, e.g. 250ms).
func (s Source) Duration(name string, dst *time.Duration) error {
	return parse(s, name, dst, time.ParseDuration)
}

// Bool sets *dst from name (1, true, false, 0, ...).
func (s Source) Bool(name string, dst *bool) error {
	return parse(s, name, dst, strconv.ParseBool)
}

// Bytes sets *dst from name: a number of bytes, optionally with a binary
// unit (KiB, MiB, GiB, TiB) or a decimal one (kB, MB, GB, TB), e.g. 2GiB.
func (s Source) Bytes(name string, dst *int64) error {
	return parse(s, name, dst, ParseBytes)
}

func parse[T any](s Source, name string, dst *T, f func(string) (T, error)) error {
	v := s.Get(name)
	if v == "" {
		return nil
	}
	x, err := f(v)
	if err != nil {
		return fmt.Errorf("%s=%q from %s: %w", name, v, s.Origin(name), err)
	}
	*dst = x
	return nil
}

// String sets *dst from the environment variable name (Environ().String).
func String(name string, dst *string) { Environ().String(name, dst) }

// Secret is Environ().Secret.
func Secret(name string, dst *string) error { return Environ().Secret(name, dst) }

// Int is Environ().Int.
func Int(name string, dst *int) error { return Environ().Int(name, dst) }

// Float64 is Environ().Float64.
func Float64(name string, dst *float64) error { return Environ().Float64(name, dst) }

// Duration is Environ().Duration.
func Duration(name string, dst *time.Duration) error { return Environ().Duration(name, dst) }

// Bool is Environ().Bool.
func Bool(name string, dst *bool) error { return Environ().Bool(name, dst) }

// Bytes is Environ().Bytes.
func Bytes(name string, dst *int64) error { return Environ().Bytes(name, dst) }

// ParseBytes reads a size as Bytes takes it.
func ParseBytes(v string) (int64, error) {
	s := strings.TrimSpace(v)
	units := []struct {
		suffix string
		n      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(num), u.n
			break
		}
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("want a size such as 512KiB, 2GiB or 1048576: %w", err)
	}
	if n < 0 && n != -1 {
		return 0, fmt.Errorf("want a size ≥ 0 (or -1)")
	}
	if f := n * float64(mult); f > 1<<62 {
		return 0, fmt.Errorf("size too large")
	}
	if n == -1 {
		return -1, nil
	}
	return int64(n * float64(mult)), nil
}
