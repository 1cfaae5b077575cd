package gepa

import "errors"

// ErrInvalidConfig wraps every problem Optimize finds in its Config before
// spending any budget.
var ErrInvalidConfig = errors.New("gepa: invalid config")

// ErrBadEvaluation is returned when the adapter answers with the wrong
// number of outcomes or a score outside [0, 1]: fix the adapter.
var ErrBadEvaluation = errors.New("gepa: adapter returned a bad evaluation")

// errBudget stops the loop before an evaluation that would exceed
// MaxMetricCalls. It never leaves the package.
var errBudget = errors.New("gepa: metric-call budget exhausted")
