package store

import "github.com/alicia-voice/alicia/pkg/telemetry"

// Trace context is not user metadata: the trace id an envelope carries in
// its meta is stored as the trace_id column of the rows the envelope makes
// (messages, sentences, tool uses, reasoning steps, memory traces), so a row
// leads to its trace and a trace (indexed) to its rows. Neither it nor the
// span id becomes an alicia_meta row.

// traceKey reports whether meta key k is trace context, kept out of alicia_meta.
func traceKey(k string) bool { return k == telemetry.MetaTraceID || k == telemetry.MetaSpanID }

// traceID returns the trace id in meta when it is a valid one (32 lowercase
// hex digits, not all zero, as telemetry writes it), else nil: the column's
// CHECK refuses anything else, and one bad meta value must not fail a row.
func traceID(meta map[string]any) *string {
	s, _ := meta[telemetry.MetaTraceID].(string)
	if len(s) != 32 {
		return nil
	}
	zero := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '0':
		case c >= '1' && c <= '9', c >= 'a' && c <= 'f':
			zero = false
		default:
			return nil
		}
	}
	if zero {
		return nil
	}
	return &s
}
