package tools

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/alicia-voice/alicia/pkg/calc"
)

// CalculatorName is the calculator tool's name.
const CalculatorName = "calculator"

// calculator evaluates arithmetic with pkg/calc's parser: nothing in the
// expression is ever run as code.
type calculator struct{}

// NewCalculator returns the calculator tool: {expression} → {expression, result}.
func NewCalculator() Tool { return calculator{} }

func (calculator) Spec() Spec {
	return Spec{
		Name: CalculatorName,
		Description: "Evaluate an arithmetic expression exactly instead of computing it in your head. " +
			"Supports + - * / % ^ (power), parentheses, constants pi and e, and functions such as " +
			"sqrt, abs, round, floor, ceil, min, max, ln (log), log10, exp, sin, cos, tan (radians).",
		Parameters: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"expression": map[string]any{
					"type":        "string",
					"description": "The expression, e.g. \"(12.5 * 4) / 3\" or \"sqrt(2) ^ 2\".",
				},
			},
			"required":             []any{"expression"},
			"additionalProperties": false,
		},
		Source: SourceBuiltin,
	}
}

func (calculator) Call(_ context.Context, _ Invocation, args map[string]any) (any, error) {
	expr, err := stringArg(args, "expression")
	if err != nil {
		return nil, err
	}
	v, err := calc.Eval(expr)
	if err != nil {
		var ce *calc.Error
		if errors.As(err, &ce) {
			return nil, fmt.Errorf("%w: %s", ErrInvalidParameters, ce.Error())
		}
		return nil, fmt.Errorf("%w: %v", ErrInvalidParameters, err)
	}
	// 12 significant digits, as calc.Format prints: 0.1+0.2 gives 0.3, not
	// 0.30000000000000004, which a voice would read out.
	if r, err := strconv.ParseFloat(calc.Format(v), 64); err == nil {
		v = r
	}
	return map[string]any{"expression": expr, "result": v}, nil
}
