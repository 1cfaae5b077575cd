package tools

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// argsValidator checks arguments against a tool's JSON Schema.
type argsValidator struct{ resolved *jsonschema.Resolved }

// newValidator resolves schema. A schema the validator cannot resolve (a
// remote $ref, an unknown draft) gives nil: such a tool's arguments are left
// to the tool itself (an MCP server validates its own input too).
func newValidator(schema map[string]any) (*argsValidator, error) {
	if len(schema) == 0 {
		return nil, nil
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		return nil, err
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	r, err := s.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: false})
	if err != nil {
		return nil, err
	}
	return &argsValidator{resolved: r}, nil
}

func (v *argsValidator) validate(args map[string]any) error {
	if v == nil {
		return nil
	}
	if err := v.resolved.Validate(args); err != nil {
		return fmt.Errorf("%w: %s", ErrInvalidParameters, schemaMessage(err))
	}
	return nil
}

// The validator prints numbers as rationals ("11/1") and fixed floats
// ("10.000000").
var (
	ratWhole   = regexp.MustCompile(`\b(-?\d+)/1\b`)
	floatWhole = regexp.MustCompile(`\b(-?\d+)\.0+\b`)
)

// schemaMessage drops the validator's "validating root: " framing, which
// says nothing to a model, and prints whole numbers plainly.
func schemaMessage(err error) string {
	msg := err.Error()
	for _, p := range []string{"validating root: ", "validating /properties/"} {
		msg = strings.ReplaceAll(msg, p, "")
	}
	msg = ratWhole.ReplaceAllString(msg, "$1")
	return floatWhole.ReplaceAllString(msg, "$1")
}

// normalizeArgs gives args the shape encoding/json produces (float64
// numbers, []any, map[string]any), whatever decoder the caller used
// (json.Number, int, typed slices), so validation and tools see one form.
func normalizeArgs(args map[string]any) (map[string]any, error) {
	if args == nil {
		return map[string]any{}, nil
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("%w: arguments are not a JSON object: %v", ErrInvalidParameters, err)
	}
	out := map[string]any{}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("%w: arguments are not a JSON object: %v", ErrInvalidParameters, err)
	}
	return out, nil
}

// toJSONMap turns any JSON-marshalable value (an MCP input schema) into a
// map[string]any.
func toJSONMap(v any) (map[string]any, error) {
	if v == nil {
		return nil, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// stringArg returns a required, non-blank string argument.
func stringArg(args map[string]any, name string) (string, error) {
	v, ok := args[name]
	if !ok || v == nil {
		return "", fmt.Errorf("%w: %q is required", ErrInvalidParameters, name)
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%w: %q must be a string", ErrInvalidParameters, name)
	}
	if strings.TrimSpace(s) == "" {
		return "", fmt.Errorf("%w: %q must not be empty", ErrInvalidParameters, name)
	}
	return s, nil
}

// intArg returns an optional whole-number argument within [lo, hi], or def
// when it is absent.
func intArg(args map[string]any, name string, def, lo, hi int) (int, error) {
	v, ok := args[name]
	if !ok || v == nil {
		return def, nil
	}
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case int:
		f = float64(n)
	case int64:
		f = float64(n)
	case json.Number:
		x, err := n.Float64()
		if err != nil {
			return 0, fmt.Errorf("%w: %q must be a whole number", ErrInvalidParameters, name)
		}
		f = x
	default:
		return 0, fmt.Errorf("%w: %q must be a whole number", ErrInvalidParameters, name)
	}
	if f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
		return 0, fmt.Errorf("%w: %q must be a whole number from %d to %d", ErrInvalidParameters, name, lo, hi)
	}
	return int(f), nil
}
