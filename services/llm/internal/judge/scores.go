package judge

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/alicia-voice/alicia/pkg/clip"
)

// MaxRationale bounds the rationale kept, in runes.
const MaxRationale = 300

// Scores is one judgement: three scores in [0, 1] and a one-sentence reason.
type Scores struct {
	Correctness, Faithfulness, Relevancy float64
	Rationale                            string
}

// ParseScores reads the judge model's reply strictly: one JSON object with
// exactly correctness, faithfulness, relevancy (numbers in [0, 1]; a
// rounding excursion of 1e-6 is clamped) and a non-empty rationale, nothing
// else. Anything other is ErrMalformed.
func ParseScores(content string) (Scores, error) {
	var raw struct {
		Correctness  *float64 `json:"correctness"`
		Faithfulness *float64 `json:"faithfulness"`
		Relevancy    *float64 `json:"relevancy"`
		Rationale    *string  `json:"rationale"`
	}
	dec := json.NewDecoder(strings.NewReader(content))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return Scores{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Scores{}, fmt.Errorf("%w: more than one JSON value", ErrMalformed)
	}
	var s Scores
	for _, f := range []struct {
		name string
		v    *float64
		dst  *float64
	}{{"correctness", raw.Correctness, &s.Correctness}, {"faithfulness", raw.Faithfulness, &s.Faithfulness}, {"relevancy", raw.Relevancy, &s.Relevancy}} {
		if f.v == nil {
			return Scores{}, fmt.Errorf("%w: no %q", ErrMalformed, f.name)
		}
		v := *f.v
		if math.IsNaN(v) || v < -1e-6 || v > 1+1e-6 {
			return Scores{}, fmt.Errorf("%w: %s %g is outside 0..1", ErrMalformed, f.name, v)
		}
		*f.dst = min(max(v, 0), 1)
	}
	if raw.Rationale != nil {
		s.Rationale = clip.Runes(strings.Join(strings.Fields(*raw.Rationale), " "), MaxRationale)
	}
	if s.Rationale == "" {
		return Scores{}, fmt.Errorf("%w: no rationale", ErrMalformed)
	}
	return s, nil
}
