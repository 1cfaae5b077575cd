package turn

import (
	"context"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/services/llm/internal/demos"
)

// Demonstrations chooses a turn's few-shot examples: the person's earlier
// well-rated turns (internal/demos.Selector).
type Demonstrations interface {
	Select(ctx context.Context, q demos.Query) ([]demos.Demo, error)
}

// demonstrations asks the selector, for at most DemonstrationsTimeout: on
// a timeout or an error the turn goes on without (counted and logged). A
// selector that ignores its context is not waited for either.
func (e *Engine) demonstrations(ctx context.Context, log zerolog.Logger, userID, cid, text string) []demos.Demo {
	if e.d.Demonstrations == nil || userID == "" || strings.TrimSpace(text) == "" || e.s.DemonstrationsTimeout <= 0 {
		return nil
	}
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, e.s.DemonstrationsTimeout)
	defer cancel()
	type result struct {
		ds  []demos.Demo
		err error
	}
	done := make(chan result, 1)
	go func() {
		ds, err := e.d.Demonstrations.Select(sctx, demos.Query{UserID: userID, ConversationID: cid, Text: text, HistoryLimit: e.s.HistoryLimit})
		done <- result{ds, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-sctx.Done():
		r.err = sctx.Err()
	}
	e.d.Metrics.DemonstrationsDuration.Observe(time.Since(start).Seconds())
	switch {
	case ctx.Err() != nil:
		return nil // the turn ended: nothing to count
	case r.err != nil && sctx.Err() != nil:
		e.d.Metrics.Demonstrations.WithLabelValues("timeout").Inc()
		log.Warn().Dur("budget", e.s.DemonstrationsTimeout).Msg("demonstrations not chosen in time; answering without")
		return nil
	case r.err != nil:
		e.d.Metrics.Demonstrations.WithLabelValues("error").Inc()
		log.Warn().Err(r.err).Msg("demonstrations unavailable; answering without")
		return nil
	case len(r.ds) == 0:
		e.d.Metrics.Demonstrations.WithLabelValues("none").Inc()
		return nil
	}
	e.d.Metrics.Demonstrations.WithLabelValues("included").Inc()
	return r.ds
}

// demonstrationsBlock is the system prompt's part showing ds, introduced
// by intro (the demonstrations component's text serving the turn).
func demonstrationsBlock(intro string, ds []demos.Demo) string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(intro))
	for _, d := range ds {
		b.WriteString("\n\nThe person asked: ")
		b.WriteString(oneLine(d.Question))
		b.WriteString("\nYou answered: ")
		b.WriteString(oneLine(d.Answer))
	}
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
