package calc

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

var constants = map[string]float64{
	"pi": math.Pi,
	"e":  math.E,
}

type function struct {
	minArgs, maxArgs int // maxArgs < 0: variadic
	fn               func(t token, args []float64) (float64, error)
}

func (f function) arity() string {
	switch {
	case f.maxArgs < 0:
		return fmt.Sprintf("want at least %d", f.minArgs)
	case f.minArgs == f.maxArgs:
		return fmt.Sprintf("want %d", f.minArgs)
	}
	return fmt.Sprintf("want %d to %d", f.minArgs, f.maxArgs)
}

func (f function) call(t token, args []float64) (float64, error) { return f.fn(t, args) }

func unary(f func(float64) float64) function {
	return function{1, 1, func(_ token, a []float64) (float64, error) { return f(a[0]), nil }}
}

func positive(name string, f func(float64) float64) function {
	return function{1, 1, func(t token, a []float64) (float64, error) {
		if a[0] <= 0 {
			return 0, errAt(ErrDomain, t.pos, "%s of a number that is not positive", name)
		}
		return f(a[0]), nil
	}}
}

var functions map[string]function

func init() {
	functions = map[string]function{
		"abs":   unary(math.Abs),
		"floor": unary(math.Floor),
		"ceil":  unary(math.Ceil),
		"exp":   unary(math.Exp),
		"sin":   unary(math.Sin),
		"cos":   unary(math.Cos),
		"tan":   unary(math.Tan),
		"log":   positive("log", math.Log),
		"ln":    positive("log", math.Log),
		"log10": positive("log10", math.Log10),
		"sqrt": {1, 1, func(t token, a []float64) (float64, error) {
			if a[0] < 0 {
				return 0, errAt(ErrDomain, t.pos, "sqrt of a negative number")
			}
			return math.Sqrt(a[0]), nil
		}},
		// round(x) rounds half away from zero; round(x, n) keeps n decimals.
		"round": {1, 2, func(t token, a []float64) (float64, error) {
			if len(a) == 1 {
				return math.Round(a[0]), nil
			}
			n := a[1]
			if n != math.Trunc(n) || n < -15 || n > 15 {
				return 0, errAt(ErrDomain, t.pos, "round digits must be an integer from -15 to 15")
			}
			return roundDecimal(a[0], int(n)), nil
		}},
		"min": {1, -1, func(_ token, a []float64) (float64, error) {
			m := a[0]
			for _, v := range a[1:] {
				m = math.Min(m, v)
			}
			return m, nil
		}},
		"max": {1, -1, func(_ token, a []float64) (float64, error) {
			m := a[0]
			for _, v := range a[1:] {
				m = math.Max(m, v)
			}
			return m, nil
		}},
	}
}

// roundDecimal rounds x to n decimals half away from zero on its shortest
// decimal form, so round(1.005, 2) is 1.01 as a person expects, not the 1.00
// that x*100 = 100.49999… would give. Shifting the exponent in the string is
// exact.
func roundDecimal(x float64, n int) float64 {
	mant, exp, _ := strings.Cut(strconv.FormatFloat(x, 'e', -1, 64), "e")
	e, _ := strconv.Atoi(exp)
	shifted, err := strconv.ParseFloat(mant+"e"+strconv.Itoa(e+n), 64)
	if err != nil || math.IsInf(shifted, 0) {
		return x // too large to have decimals to drop
	}
	r, err := strconv.ParseFloat(strconv.FormatFloat(math.Round(shifted), 'f', -1, 64)+"e"+strconv.Itoa(-n), 64)
	if err != nil {
		return x
	}
	return r
}

func unexpected(t token) error {
	if t.kind == tokEOF {
		return errAt(ErrSyntax, t.pos, "unexpected end of expression")
	}
	return errAt(ErrSyntax, t.pos, "unexpected '%s'", t.text)
}

// Format prints v for people: integers without a fractional part, anything
// else with up to 12 significant digits.
func Format(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case v == 0:
		return "0" // also -0
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	s := strconv.FormatFloat(v, 'g', 12, 64)
	if f, err := strconv.ParseFloat(s, 64); err == nil && f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatFloat(f, 'f', -1, 64) // 2.0000000000001 → "2"
	}
	return s
}
