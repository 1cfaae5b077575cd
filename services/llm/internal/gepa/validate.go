package gepa

import (
	"errors"
	"fmt"
	"math"
)

func (c *Config[E]) validate() error {
	var errs []error
	if len(c.Seed) == 0 {
		errs = append(errs, errors.New("Seed has no component: give at least one named text"))
	}
	for _, comp := range c.Components {
		if _, ok := c.Seed[comp]; !ok {
			errs = append(errs, fmt.Errorf("component %q is not in Seed: optimise only components the seed has", comp))
		}
	}
	if len(c.Train) == 0 {
		errs = append(errs, errors.New("Train is empty: reflection needs training examples"))
	}
	if len(c.Val) == 0 {
		errs = append(errs, errors.New("Val is empty: candidates are scored on validation examples"))
	}
	if c.Adapter == nil {
		errs = append(errs, errors.New("Adapter is nil"))
	}
	if c.Reflector == nil {
		errs = append(errs, errors.New("Reflector is nil"))
	}
	if c.MaxMetricCalls < len(c.Val) {
		errs = append(errs, fmt.Errorf("MaxMetricCalls %d cannot even score the seed on %d validation examples: raise it", c.MaxMetricCalls, len(c.Val)))
	}
	if c.MinibatchSize < 0 || c.MaxMerges < 0 || c.MergeSubsample < 0 {
		errs = append(errs, errors.New("MinibatchSize, MaxMerges and MergeSubsample must not be negative"))
	}
	switch c.ComponentSelector {
	case "", ComponentsRoundRobin, ComponentsAll:
	default:
		errs = append(errs, fmt.Errorf("ComponentSelector %q: use %q or %q", c.ComponentSelector, ComponentsRoundRobin, ComponentsAll))
	}
	switch c.CandidateSelector {
	case "", SelectPareto, SelectCurrentBest:
	default:
		errs = append(errs, fmt.Errorf("CandidateSelector %q: use %q or %q", c.CandidateSelector, SelectPareto, SelectCurrentBest))
	}
	total := 0.0
	for d, w := range c.Weights {
		if w < 0 || math.IsNaN(w) || math.IsInf(w, 0) {
			errs = append(errs, fmt.Errorf("weight of %q is %v: weights must be finite and not negative", d, w))
		}
		total += w
	}
	if len(c.Weights) > 0 && total <= 0 {
		errs = append(errs, errors.New("Weights sum to 0: give at least one dimension a positive weight"))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
}
