// Package config reads ALICIA_* environment variables into service Configs:
// defaults stay in code, each helper overrides one field when its variable is
// set and reports a parse error naming the variable.
package config

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// String sets *dst from name when it is set and not empty.
func String(name string, dst *string) {
	if v := os.Getenv(name); v != "" {
		*dst = v
	}
}

// Secret sets *dst from name, or from the file named by name_FILE (trimmed),
// so secrets can come from mounted files instead of the environment.
func Secret(name string, dst *string) error {
	if v := os.Getenv(name); v != "" {
		*dst = v
		return nil
	}
	f := os.Getenv(name + "_FILE")
	if f == "" {
		return nil
	}
	b, err := os.ReadFile(f)
	if err != nil {
		return fmt.Errorf("%s_FILE: %w", name, err)
	}
	*dst = strings.TrimSpace(string(b))
	return nil
}

// Int sets *dst from name.
func Int(name string, dst *int) error {
	return parse(name, dst, strconv.Atoi)
}

// Float64 sets *dst from name.
func Float64(name string, dst *float64) error {
	return parse(name, dst, func(v string) (float64, error) { return strconv.ParseFloat(v, 64) })
}

// Duration sets *dst from name (Go duration syntax, e.g. 250ms).
func Duration(name string, dst *time.Duration) error {
	return parse(name, dst, time.ParseDuration)
}

// Bool sets *dst from name (1, true, false, 0, ...).
func Bool(name string, dst *bool) error {
	return parse(name, dst, strconv.ParseBool)
}

func parse[T any](name string, dst *T, f func(string) (T, error)) error {
	v := os.Getenv(name)
	if v == "" {
		return nil
	}
	x, err := f(v)
	if err != nil {
		return fmt.Errorf("%s=%q: %w", name, v, err)
	}
	*dst = x
	return nil
}

// Bytes sets *dst from name: a number of bytes, optionally with a binary
// unit (KiB, MiB, GiB, TiB) or a decimal one (kB, MB, GB, TB), e.g. 2GiB.
func Bytes(name string, dst *int64) error {
	return parse(name, dst, ParseBytes)
}

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
