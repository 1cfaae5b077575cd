package calc_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/calc"
)

func TestEval(t *testing.T) {
	tests := []struct {
		name, expr string
		want       float64
	}{
		{"integer", "42", 42},
		{"decimal", "3.25", 3.25},
		{"leading dot", ".5", 0.5},
		{"scientific", "1e-3", 0.001},
		{"scientific upper plus", "2.5E+2", 250},
		{"add sub left assoc", "10 - 3 - 2", 5},
		{"mul before add", "2 + 3 * 4", 14},
		{"div left assoc", "100 / 10 / 5", 2},
		{"modulo", "17 % 5", 2},
		{"modulo precedence", "2 + 17 % 5 * 2", 6},
		{"power right assoc", "2 ^ 3 ^ 2", 512},
		{"power above mul", "2 * 3 ^ 2", 18},
		{"double star power", "2 ** 10", 1024},
		{"unary minus binds looser than power", "-2 ^ 2", -4},
		{"parenthesised negative base", "(-2) ^ 2", 4},
		{"negative exponent", "2 ^ -1", 0.5},
		{"unary chain", "--+-3", -3},
		{"unary after operator", "5 * -2", -10},
		{"parentheses", "(2 + 3) * 4", 20},
		{"nested parentheses", "((((1))))", 1},
		{"sqrt", "sqrt(16)", 4},
		{"abs", "abs(-7.5)", 7.5},
		{"round half away", "round(2.5) + round(-2.5)", 0},
		{"round digits", "round(1.005, 2)", 1.01},
		{"round negative digits", "round(1250, -2)", 1300},
		{"round huge", "round(1e300, 2)", 1e300},
		{"floor ceil", "floor(2.7) + ceil(2.1)", 5},
		{"min max variadic", "min(3, 1, 2) + max(4, 9, 6)", 10},
		{"log natural", "log(e)", 1},
		{"log10", "log10(1000)", 3},
		{"exp", "exp(0)", 1},
		{"trig radians", "sin(0) + cos(0) + tan(0)", 1},
		{"sin pi over 2", "sin(pi / 2)", 1},
		{"constants", "pi", math.Pi},
		{"case insensitive", "SQRT(4) * PI / pi", 2},
		{"function of expression", "sqrt(3^2 + 4^2)", 5},
		{"unicode operators", "6 × 7 ÷ 2 − 1", 20},
		{"whitespace", " \t1\n+ 2 ", 3},
		{"float sum", "0.1 + 0.2", 0.30000000000000004},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := calc.Eval(tc.expr)
			if err != nil {
				t.Fatalf("Eval(%q): %v", tc.expr, err)
			}
			if math.Abs(got-tc.want) > 1e-12*math.Max(1, math.Abs(tc.want)) {
				t.Fatalf("Eval(%q) = %v, want %v", tc.expr, got, tc.want)
			}
		})
	}
}

func TestEvalErrors(t *testing.T) {
	tests := []struct {
		name, expr, msg string
		kind            error
	}{
		{"extra close paren", "(1 + 2))", "unexpected ')' at 8", calc.ErrSyntax},
		{"close paren first", "1 + )", "unexpected ')' at 5", calc.ErrSyntax},
		{"missing close paren", "(1 + 2", "missing \")\" at 7", calc.ErrSyntax},
		{"trailing operator", "1 +", "unexpected end of expression at 4", calc.ErrSyntax},
		{"two numbers", "2 3", "unexpected '3' at 3", calc.ErrSyntax},
		{"empty", "  ", "empty expression", calc.ErrSyntax},
		{"division by zero", "1 / (2 - 2)", "division by zero at 3", calc.ErrDivisionByZero},
		{"modulo by zero", "5 % 0", "division by zero at 3", calc.ErrDivisionByZero},
		{"unknown function", "foo(1)", "unknown function foo at 1", calc.ErrUnknownFunction},
		{"unknown name", "2 * x", "unknown name x at 5", calc.ErrUnknownName},
		{"function without call", "sqrt 4", "expected '(' after sqrt at 6", calc.ErrSyntax},
		{"min no args", "min()", "wrong number of arguments to min", calc.ErrArgCount},
		{"sqrt two args", "sqrt(1, 2)", "wrong number of arguments to sqrt", calc.ErrArgCount},
		{"underscore in number", "1_000", "unexpected '_' in number at 2", calc.ErrSyntax},
		{"malformed exponent", "1e+", "malformed number", calc.ErrSyntax},
		{"two dots", "1.2.3", "unexpected '.' in number at 4", calc.ErrSyntax},
		{"hex refused", "0x10", "unexpected 'x' in number at 2", calc.ErrSyntax},
		{"stray character", "2 $ 3", "unexpected '$' at 3", calc.ErrSyntax},
		{"code is not evaluated", "os.Exit(1)", "unexpected '.' at 3", calc.ErrSyntax},
		{"sqrt negative", "sqrt(-1)", "sqrt of a negative number", calc.ErrDomain},
		{"log zero", "log(0)", "log of a number that is not positive", calc.ErrDomain},
		{"overflow", "10 ^ 400", "not a finite number", calc.ErrNotFinite},
		{"literal out of range", "1e999", "number out of range", calc.ErrSyntax},
		{"too long", strings.Repeat("1+", 500) + "1", "expression too long", calc.ErrTooLong},
		{"too deep", strings.Repeat("(", 101) + "1" + strings.Repeat(")", 101), "nested too deeply", calc.ErrTooDeep},
		{"deep unary", strings.Repeat("-", 200) + "1", "nested too deeply", calc.ErrTooDeep},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := calc.Eval(tc.expr)
			if err == nil {
				t.Fatalf("Eval(%q) = %v, want error %q", tc.expr, v, tc.msg)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Eval(%q) error = %q, want it to contain %q", tc.expr, err, tc.msg)
			}
			if !errors.Is(err, tc.kind) {
				t.Errorf("Eval(%q) error %v is not %v", tc.expr, err, tc.kind)
			}
		})
	}
}

func TestDepthLimitAllowsHundred(t *testing.T) {
	expr := strings.Repeat("(", 100) + "1" + strings.Repeat(")", 100)
	if v, err := calc.Eval(expr); err != nil || v != 1 {
		t.Fatalf("100 nested parentheses: %v, %v", v, err)
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		name string
		v    float64
		want string
	}{
		{"integer", 42, "42"},
		{"negative integer", -7, "-7"},
		{"negative zero", math.Copysign(0, -1), "0"},
		{"large integer", 123456789012, "123456789012"},
		{"decimal", 2.5, "2.5"},
		{"float noise", 0.1 + 0.2, "0.3"},
		{"near integer", 2.0000000000001, "2"},
		{"third", 1.0 / 3, "0.333333333333"},
		{"twelve digits", math.Pi, "3.14159265359"},
		{"huge", 1e20, "1e+20"},
		{"tiny", 1.5e-9, "1.5e-09"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := calc.Format(tc.v); got != tc.want {
				t.Fatalf("Format(%v) = %q, want %q", tc.v, got, tc.want)
			}
		})
	}
}

func FuzzEval(f *testing.F) {
	for _, s := range []string{"1+2*3", "2^3^2", "-(-(1))", "sqrt(2)", "min(1,2,3)", "1/0", "((", "1e308*10", "round(2.5, 1)", "pi*e", "×÷−", "1_0", ".5e-3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		start := time.Now()
		v, err := calc.Eval(expr)
		if d := time.Since(start); d > 100*time.Millisecond {
			t.Fatalf("Eval(%q) took %v", expr, d)
		}
		if err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
			t.Fatalf("Eval(%q) = %v without error", expr, v)
		}
		if err == nil {
			_ = calc.Format(v)
		}
	})
}
