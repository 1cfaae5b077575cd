package migrations_test

import (
	"database/sql"
	"slices"
	"testing"

	"github.com/alicia-voice/alicia/migrations"
)

// traceVersion is the migration that moves trace ids from alicia_meta into
// trace_id columns (00009_trace_id.sql).
const traceVersion = 9

const (
	traceA = "4bf92f3577b34da6a3ce929d0e0e4736"
	traceB = "0af7651916cd43dd8448eb211c80319c"
)

// traceRows returns "id=trace" for every row of the five tables with a
// trace_id column, NULL as "id=", sorted by id.
func traceRows(t *testing.T, db *sql.DB) []string {
	t.Helper()
	return queryStrings(t, db, `SELECT id || '=' || COALESCE(trace_id, '') FROM (
		SELECT id, trace_id FROM alicia_messages
		UNION ALL SELECT id, trace_id FROM alicia_sentences
		UNION ALL SELECT id, trace_id FROM alicia_tool_uses
		UNION ALL SELECT id, trace_id FROM alicia_reasoning_steps
		UNION ALL SELECT id, trace_id FROM alicia_memory_used) r ORDER BY id COLLATE "C"`)
}

// TestTraceIDMigration: a database written before 00009, with trace context
// as alicia_meta rows, gets the trace ids in the trace_id columns of their
// rows (updated_at untouched) and no trace context left in alicia_meta;
// other meta stays. Down puts the trace ids back as meta rows and drops the
// columns; Up again gives the same columns.
func TestTraceIDMigration(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := testContext(t)
	p, err := migrations.NewProvider(db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, traceVersion-1); err != nil {
		t.Fatal(err)
	}

	const old = `'2025-01-02 03:04:05+00'`
	exec(t, db, `INSERT INTO alicia_conversations (id) VALUES ('ac_1')`)
	exec(t, db, `INSERT INTO alicia_messages (id, conversation_id, sequence_number, message_role, created_at, updated_at)
		VALUES ('am_u', 'ac_1', 1, 'user', `+old+`, `+old+`), ('am_a', 'ac_1', 2, 'assistant', `+old+`, `+old+`),
		       ('am_none', 'ac_1', 3, 'user', `+old+`, `+old+`)`)
	exec(t, db, `INSERT INTO alicia_sentences (id, message_id, sentence_sequence_number, text, created_at, updated_at)
		VALUES ('ams_1', 'am_a', 1, 'One.', `+old+`, `+old+`), ('ams_2', 'am_a', 2, 'Two.', `+old+`, `+old+`),
		       ('ams_3', 'am_a', 3, 'Three.', `+old+`, `+old+`), ('ams_4', 'am_a', 4, 'Four.', `+old+`, `+old+`)`)
	exec(t, db, `INSERT INTO alicia_tool_uses (id, conversation_id, message_id, tool_name, tool_arguments, created_at, updated_at)
		VALUES ('atu_1', 'ac_1', 'am_a', 'calculator', '{}', `+old+`, `+old+`)`)
	exec(t, db, `INSERT INTO alicia_reasoning_steps (id, message_id, content, sequence_number, created_at, updated_at)
		VALUES ('ar_1', 'am_a', 'think', 1, `+old+`, `+old+`)`)
	exec(t, db, `INSERT INTO alicia_memory (id, content) VALUES ('amem_1', 'likes tea')`)
	exec(t, db, `INSERT INTO alicia_memory_used (id, conversation_id, message_id, memory_id, similarity_score, created_at, updated_at)
		VALUES ('amu_1', 'ac_1', 'am_u', 'amem_1', 0.9, `+old+`, `+old+`)`)
	// What persistence wrote before: trace and span id of every envelope on
	// the row it named (the conversation's too), and other meta.
	for ref, trace := range map[string]string{
		"am_u": traceA, "am_a": traceB, "ams_1": traceB, "atu_1": traceA, "ar_1": traceB, "amu_1": traceA, "ac_1": traceA,
		"ams_2": "00000000000000000000000000000000", // all zero: no trace
		"ams_3": "4BF92F3577B34DA6A3CE929D0E0E4736", // not as telemetry writes it
	} {
		exec(t, db, `INSERT INTO alicia_meta (ref, key, value) VALUES ($1, 'messaging.trace_id', $2), ($1, 'messaging.span_id', 'b7ad6b7169203331')`, ref, trace)
	}
	exec(t, db, `INSERT INTO alicia_meta (ref, key, value, deleted_at) VALUES ('ams_4', 'messaging.trace_id', $1, now())`, traceA)
	exec(t, db, `INSERT INTO alicia_meta (ref, key, value) VALUES ('am_u', 'source', 'microphone'), ('ac_1', 'alicia.applied_seq.CONVERSATIONS.head', '7')`)

	if _, err := p.UpTo(ctx, traceVersion); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"am_a=" + traceB, "am_none=", "am_u=" + traceA, "amu_1=" + traceA, "ams_1=" + traceB, "ams_2=", "ams_3=", "ams_4=",
		"ar_1=" + traceB, "atu_1=" + traceA,
	}
	slices.Sort(want) // byte order, as COLLATE "C"
	if got := traceRows(t, db); !slices.Equal(got, want) {
		t.Errorf("trace ids after Up:\n got  %v\n want %v", got, want)
	}
	if got := queryStrings(t, db, `SELECT ref || ' ' || key || '=' || value FROM alicia_meta ORDER BY ref COLLATE "C", key COLLATE "C"`); !slices.Equal(got,
		[]string{"ac_1 alicia.applied_seq.CONVERSATIONS.head=7", "am_u source=microphone"}) {
		t.Errorf("meta after Up: %v, want only the non-trace rows", got)
	}
	if n := scalar[int](t, db, `SELECT count(*) FROM (
		SELECT updated_at FROM alicia_messages UNION ALL SELECT updated_at FROM alicia_sentences
		UNION ALL SELECT updated_at FROM alicia_tool_uses UNION ALL SELECT updated_at FROM alicia_reasoning_steps
		UNION ALL SELECT updated_at FROM alicia_memory_used) r WHERE updated_at <> `+old); n != 0 {
		t.Errorf("%d rows got a new updated_at from the migration", n)
	}
	// The trigger is back on: an update sets updated_at again.
	exec(t, db, `UPDATE alicia_messages SET contents = 'x' WHERE id = 'am_none'`)
	if n := scalar[int](t, db, `SELECT count(*) FROM alicia_messages WHERE id = 'am_none' AND updated_at <> `+old); n != 1 {
		t.Error("updated_at trigger of alicia_messages disabled after the migration")
	}
	// The columns take trace ids as telemetry writes them, nothing else.
	_, err = db.ExecContext(ctx, `UPDATE alicia_messages SET trace_id = '4BF92F3577B34DA6A3CE929D0E0E4736' WHERE id = 'am_none'`)
	wantPgError(t, err, checkViolation, "upper-case trace id")
	_, err = db.ExecContext(ctx, `UPDATE alicia_sentences SET trace_id = repeat('0', 32) WHERE id = 'ams_2'`)
	wantPgError(t, err, checkViolation, "all-zero trace id")

	if _, err := p.DownTo(ctx, traceVersion-1); err != nil {
		t.Fatal(err)
	}
	if n := scalar[int](t, db, `SELECT count(*) FROM information_schema.columns
		WHERE table_schema = current_schema() AND column_name = 'trace_id'`); n != 0 {
		t.Errorf("%d trace_id columns left after Down", n)
	}
	if got := queryStrings(t, db, `SELECT ref || '=' || value FROM alicia_meta WHERE key = 'messaging.trace_id' ORDER BY ref COLLATE "C"`); !slices.Equal(got,
		[]string{"am_a=" + traceB, "am_u=" + traceA, "ams_1=" + traceB, "amu_1=" + traceA, "ar_1=" + traceB, "atu_1=" + traceA}) {
		t.Errorf("trace meta after Down: %v", got)
	}

	if _, err := p.UpTo(ctx, traceVersion); err != nil {
		t.Fatal(err)
	}
	if got := traceRows(t, db); !slices.Equal(got, want) {
		t.Errorf("trace ids after Down and Up:\n got  %v\n want %v", got, want)
	}
	if n := scalar[int](t, db, `SELECT count(*) FROM alicia_meta WHERE key IN ('messaging.trace_id', 'messaging.span_id')`); n != 0 {
		t.Errorf("%d trace meta rows after Down and Up", n)
	}
}
