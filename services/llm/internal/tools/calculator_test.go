package tools_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/services/llm/internal/tools"
)

func TestCalculator(t *testing.T) {
	calc := tools.NewCalculator()
	for _, tc := range []struct {
		name string
		expr string
		want float64
	}{
		{"precedence", "2 + 3 * 4", 14},
		{"parentheses and division", "(12.5 * 4) / 3", 16.6666666667},
		{"power is right-associative", "2 ^ 3 ^ 2", 512},
		{"functions", "sqrt(16) + max(1, 7, 3)", 11},
		{"rounding noise removed", "0.1 + 0.2", 0.3},
		{"unicode operators", "6 × 7", 42},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := calc.Call(testContext(t), tools.Invocation{}, map[string]any{"expression": tc.expr})
			if err != nil {
				t.Fatalf("Call(%q): %v", tc.expr, err)
			}
			m := got.(map[string]any)
			if m["expression"] != tc.expr || m["result"] != tc.want {
				t.Fatalf("Call(%q) = %v, want result %v", tc.expr, m, tc.want)
			}
		})
	}
}

func TestCalculatorErrors(t *testing.T) {
	calc := tools.NewCalculator()
	for _, tc := range []struct {
		name    string
		args    map[string]any
		message string
	}{
		{"syntax error carries calc's message", map[string]any{"expression": "2 +* 3"}, "unexpected '*' at 4"},
		{"division by zero", map[string]any{"expression": "1/0"}, "division by zero"},
		{"code is not run", map[string]any{"expression": "exit(1)"}, "unknown function"},
		{"missing expression", map[string]any{}, `"expression" is required`},
		{"expression not a string", map[string]any{"expression": 12}, "must be a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := calc.Call(testContext(t), tools.Invocation{}, tc.args)
			if !errors.Is(err, tools.ErrInvalidParameters) {
				t.Fatalf("err = %v, want ErrInvalidParameters", err)
			}
			if !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("err = %q, want it to contain %q", err, tc.message)
			}
		})
	}
}
