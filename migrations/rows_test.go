package migrations_test

import (
	"database/sql"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/alicia-voice/alicia/migrations"
)

func migratedDB(t *testing.T) *sql.DB {
	t.Helper()
	db := newDB(t)
	if err := migrations.Up(testContext(t), db); err != nil {
		t.Fatal(err)
	}
	return db
}

func exec(t *testing.T, db *sql.DB, query string, args ...any) int64 {
	t.Helper()
	res, err := db.ExecContext(testContext(t), query, args...)
	if err != nil {
		t.Fatalf("exec %q: %v", query, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func scalar[T any](t *testing.T, db *sql.DB, query string, args ...any) T {
	t.Helper()
	var v T
	if err := db.QueryRowContext(testContext(t), query, args...).Scan(&v); err != nil {
		t.Fatalf("query %q: %v", query, err)
	}
	return v
}

// wantPgError asserts err is a PostgreSQL error with the given SQLSTATE.
func wantPgError(t *testing.T, err error, code, what string) {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		t.Fatalf("%s: got error %v, want SQLSTATE %s", what, err, code)
	}
	if pgErr.Code != code {
		t.Fatalf("%s: got SQLSTATE %s (%s), want %s", what, pgErr.Code, pgErr.Message, code)
	}
}

const (
	checkViolation      = "23514"
	foreignKeyViolation = "23503"
	uniqueViolation     = "23505"
)

func TestGenerateRandomID(t *testing.T) {
	t.Parallel()
	db := migratedDB(t)

	id := scalar[string](t, db, `SELECT generate_random_id('am')`)
	if !regexp.MustCompile(`^am_[0-9A-Za-z]{20}$`).MatchString(id) {
		t.Errorf("generate_random_id('am') = %q", id)
	}
	if n := scalar[int](t, db, `SELECT count(DISTINCT generate_random_id('x')) FROM generate_series(1, 5000)`); n != 5000 {
		t.Errorf("5000 ids, %d distinct", n)
	}
	_, err := db.ExecContext(testContext(t), `SELECT generate_random_id('')`)
	wantPgError(t, err, "22023", "empty prefix")

	// Every table's default id carries its prefix.
	for query, prefix := range map[string]string{
		`INSERT INTO alicia_conversations DEFAULT VALUES RETURNING id`:                                                  "ac_",
		`INSERT INTO alicia_tools (name) VALUES ('clock') RETURNING id`:                                                 "at_",
		`INSERT INTO alicia_memory (content) VALUES ('likes tea') RETURNING id`:                                         "amem_",
		`INSERT INTO alicia_meta (ref, key) VALUES ('ac_x', 'k') RETURNING id`:                                          "amt_",
		`INSERT INTO alicia_mcp_servers (name, transport, url) VALUES ('w', 'http', 'http://127.0.0.1:1') RETURNING id`: "amcp_",
	} {
		if got := scalar[string](t, db, query); !strings.HasPrefix(got, prefix) {
			t.Errorf("%s: id %q, want prefix %q", query, got, prefix)
		}
	}
}

func TestConversationDefaultsChecksAndTrigger(t *testing.T) {
	t.Parallel()
	db := migratedDB(t)
	ctx := testContext(t)

	var id, status string
	var correctness, faithfulness float64
	err := db.QueryRowContext(ctx, `INSERT INTO alicia_conversations (title, created_at, updated_at)
		VALUES ('first', '2001-01-01', '2001-01-01') RETURNING id, status, correctness, faithfulness`).
		Scan(&id, &status, &correctness, &faithfulness)
	if err != nil {
		t.Fatal(err)
	}
	if status != "active" || correctness != 0.5 || faithfulness != 0.5 {
		t.Errorf("defaults: status=%s correctness=%v faithfulness=%v", status, correctness, faithfulness)
	}

	exec(t, db, `UPDATE alicia_conversations SET title = 'renamed' WHERE id = $1`, id)
	updated := scalar[time.Time](t, db, `SELECT updated_at FROM alicia_conversations WHERE id = $1`, id)
	created := scalar[time.Time](t, db, `SELECT created_at FROM alicia_conversations WHERE id = $1`, id)
	if !updated.After(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)) || created.Year() != 2001 {
		t.Errorf("after UPDATE: created_at=%v updated_at=%v; trigger should set only updated_at", created, updated)
	}

	for _, q := range []string{
		`UPDATE alicia_conversations SET correctness = 1.5 WHERE id = $1`,
		`UPDATE alicia_conversations SET user_feedback = -0.01 WHERE id = $1`,
		`UPDATE alicia_conversations SET relevancy = 2 WHERE id = $1`,
		`UPDATE alicia_conversations SET last_server_stanza_id = 3 WHERE id = $1`,
	} {
		_, err := db.ExecContext(ctx, q, id)
		wantPgError(t, err, checkViolation, q)
	}
	exec(t, db, `UPDATE alicia_conversations SET correctness = 1, faithfulness = 0 WHERE id = $1`, id)

	for _, q := range []string{
		`INSERT INTO alicia_memory (content, importance) VALUES ('x', 1.01)`,
		`INSERT INTO alicia_memory (content, confidence) VALUES ('x', -1)`,
		`INSERT INTO alicia_memory (content, user_rating) VALUES ('x', 6)`,
	} {
		_, err := db.ExecContext(ctx, q)
		wantPgError(t, err, checkViolation, q)
	}
	if v := scalar[float64](t, db, `INSERT INTO alicia_memory (content) VALUES ('x') RETURNING confidence`); v != 1 {
		t.Errorf("memory confidence default = %v, want 1", v)
	}
}

// A conversation is a tree: siblings share previous_id and sequence_number,
// the tip must be a message of the same conversation, and hard deletion
// cascades.
func TestMessageTreeSentencesAndCascade(t *testing.T) {
	t.Parallel()
	db := migratedDB(t)
	ctx := testContext(t)

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The tip FK is deferred: the conversation may point at a message
	// inserted later in the same transaction.
	steps := []string{
		`INSERT INTO alicia_conversations (id, livekit_room_name, tip_message_id) VALUES ('ac_1', 'conv_ac_1', 'am_a2')`,
		`INSERT INTO alicia_messages (id, conversation_id, sequence_number, message_role, contents)
			VALUES ('am_u', 'ac_1', 1, 'user', 'hello')`,
		`INSERT INTO alicia_messages (id, conversation_id, sequence_number, previous_id, message_role, completion_status)
			VALUES ('am_a1', 'ac_1', 2, 'am_u', 'assistant', 'streaming')`,
		`INSERT INTO alicia_messages (id, conversation_id, sequence_number, previous_id, message_role)
			VALUES ('am_a2', 'ac_1', 2, 'am_u', 'assistant')`,
		`INSERT INTO alicia_conversations (id) VALUES ('ac_2')`,
	}
	for _, q := range steps {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			_ = tx.Rollback()
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := scalar[int](t, db, `SELECT count(*) FROM alicia_messages WHERE previous_id = 'am_u' AND sequence_number = 2`); n != 2 {
		t.Errorf("siblings: %d, want 2", n)
	}

	// Cross-conversation links are rejected.
	_, err = db.ExecContext(ctx, `UPDATE alicia_conversations SET tip_message_id = 'am_a1' WHERE id = 'ac_2'`)
	wantPgError(t, err, foreignKeyViolation, "tip in another conversation")
	_, err = db.ExecContext(ctx, `INSERT INTO alicia_messages (conversation_id, sequence_number, previous_id, message_role)
		VALUES ('ac_2', 2, 'am_u', 'user')`)
	wantPgError(t, err, foreignKeyViolation, "parent in another conversation")
	_, err = db.ExecContext(ctx, `INSERT INTO alicia_conversations (livekit_room_name) VALUES ('conv_ac_1')`)
	wantPgError(t, err, uniqueViolation, "duplicate room name")

	// Offline sync: a redelivered SyncRequest message finds its local_id.
	insertSynced := `INSERT INTO alicia_messages (conversation_id, sequence_number, message_role, local_id)
		VALUES ('ac_2', 1, 'user', 'local-1') ON CONFLICT (conversation_id, local_id) DO NOTHING`
	if n := exec(t, db, insertSynced); n != 1 {
		t.Errorf("first sync insert affected %d rows", n)
	}
	if n := exec(t, db, insertSynced); n != 0 {
		t.Errorf("redelivered sync insert affected %d rows, want 0", n)
	}

	// Sentences: a redelivered AssistantSentence is a no-op.
	insertSentence := `INSERT INTO alicia_sentences (message_id, sentence_sequence_number, text, audio_type)
		VALUES ('am_a1', $1, $2, 'output') ON CONFLICT (message_id, sentence_sequence_number) DO NOTHING`
	for seq, text := range []string{"Hi.", "How can I help?"} {
		if n := exec(t, db, insertSentence, seq+1, text); n != 1 {
			t.Errorf("sentence %d: %d rows", seq+1, n)
		}
	}
	if n := exec(t, db, insertSentence, 1, "Hi."); n != 0 {
		t.Errorf("redelivered sentence inserted %d rows", n)
	}
	if id := scalar[string](t, db, `SELECT id FROM alicia_sentences WHERE sentence_sequence_number = 1`); !strings.HasPrefix(id, "ams_") {
		t.Errorf("sentence id %q", id)
	}
	// Barge-in: the first sentence was played, the rest are marked unplayed.
	exec(t, db, `UPDATE alicia_sentences SET playout_status = 'played', played_at = now()
		WHERE message_id = 'am_a1' AND sentence_sequence_number = 1`)
	if n := exec(t, db, `UPDATE alicia_sentences SET playout_status = 'unplayed'
		WHERE message_id = 'am_a1' AND playout_status = 'pending'`); n != 1 {
		t.Errorf("marked %d sentences unplayed, want 1", n)
	}

	// Audio, tool use, reasoning and memory use hang off the message.
	exec(t, db, `INSERT INTO alicia_audio (id, conversation_id, message_id, audio_type, audio_format, duration_ms)
		VALUES ('aa_1', 'ac_1', 'am_u', 'input', 'audio/opus', 1200)`)
	exec(t, db, `UPDATE alicia_messages SET audio_id = 'aa_1' WHERE id = 'am_u'`)
	exec(t, db, `INSERT INTO alicia_tool_uses (conversation_id, message_id, tool_name, tool_arguments)
		VALUES ('ac_1', 'am_a1', 'clock', '{"tz":"UTC"}')`)
	exec(t, db, `INSERT INTO alicia_reasoning_steps (message_id, content, sequence_number) VALUES ('am_a1', 'think', 1)`)
	memID := scalar[string](t, db, `INSERT INTO alicia_memory (content) VALUES ('likes tea') RETURNING id`)
	exec(t, db, `INSERT INTO alicia_memory_used (conversation_id, message_id, memory_id, similarity_score)
		VALUES ('ac_1', 'am_a1', $1, 0.9)`, memID)
	exec(t, db, `INSERT INTO alicia_votes (conversation_id, message_id, target_type, target_id, vote)
		VALUES ('ac_1', 'am_a1', 'message', 'am_a1', 'up')`)
	exec(t, db, `INSERT INTO alicia_notes (conversation_id, message_id, content) VALUES ('ac_1', 'am_a1', 'ok')`)
	exec(t, db, `INSERT INTO alicia_session_stats (conversation_id, message_count) VALUES ('ac_1', 3)`)

	// Hard delete removes everything that belongs to the conversation; the
	// memory itself stays.
	exec(t, db, `DELETE FROM alicia_conversations WHERE id = 'ac_1'`)
	for _, table := range []string{
		"alicia_messages WHERE conversation_id = 'ac_1'", "alicia_sentences", "alicia_audio", "alicia_tool_uses",
		"alicia_reasoning_steps", "alicia_memory_used", "alicia_votes", "alicia_notes", "alicia_session_stats",
	} {
		if n := scalar[int](t, db, `SELECT count(*) FROM `+table); n != 0 {
			t.Errorf("%s: %d rows left after deleting the conversation", table, n)
		}
	}
	if n := scalar[int](t, db, `SELECT count(*) FROM alicia_memory`); n != 1 {
		t.Errorf("memory rows: %d, want 1", n)
	}
}

func TestUpsertKeys(t *testing.T) {
	t.Parallel()
	db := migratedDB(t)

	upsertMeta := `INSERT INTO alicia_meta (ref, key, value) VALUES ('am_1', 'locale', $1)
		ON CONFLICT (ref, key) DO UPDATE SET value = EXCLUDED.value, deleted_at = NULL`
	exec(t, db, upsertMeta, "t1")
	exec(t, db, upsertMeta, "t2")
	if v := scalar[string](t, db, `SELECT string_agg(value, ',') FROM alicia_meta WHERE ref = 'am_1'`); v != "t2" {
		t.Errorf("meta values %q, want t2", v)
	}

	exec(t, db, `INSERT INTO alicia_conversations (id) VALUES ('ac_v')`)
	exec(t, db, `INSERT INTO alicia_messages (id, conversation_id, sequence_number, message_role) VALUES ('am_v', 'ac_v', 1, 'assistant')`)
	upsertVote := `INSERT INTO alicia_votes (conversation_id, message_id, target_type, target_id, vote)
		VALUES ('ac_v', 'am_v', 'message', 'am_v', $1)
		ON CONFLICT (user_id, target_type, target_id) DO UPDATE SET vote = EXCLUDED.vote, deleted_at = NULL`
	exec(t, db, upsertVote, "up")
	exec(t, db, upsertVote, "down")
	if v := scalar[string](t, db, `SELECT string_agg(vote::text, ',') FROM alicia_votes`); v != "down" {
		t.Errorf("votes %q, want a single 'down' (user_id NULL is one user)", v)
	}

	upsertOffset := `INSERT INTO alicia_stream_offsets (stream, consumer, last_seq) VALUES ('ALICIA', 'persistence', $1)
		ON CONFLICT (stream, consumer) DO UPDATE SET last_seq = GREATEST(alicia_stream_offsets.last_seq, EXCLUDED.last_seq)`
	for _, seq := range []int64{5, 9, 7} {
		exec(t, db, upsertOffset, seq)
	}
	if v := scalar[int64](t, db, `SELECT last_seq FROM alicia_stream_offsets WHERE stream = 'ALICIA' AND consumer = 'persistence'`); v != 9 {
		t.Errorf("last_seq = %d, want 9", v)
	}

	exec(t, db, `INSERT INTO alicia_tools (name, description) VALUES ('clock', 'v1')
		ON CONFLICT (name) DO UPDATE SET description = EXCLUDED.description`)
	exec(t, db, `INSERT INTO alicia_tools (name, description) VALUES ('clock', 'v2')
		ON CONFLICT (name) DO UPDATE SET description = EXCLUDED.description`)
	if v := scalar[string](t, db, `SELECT string_agg(description, ',') FROM alicia_tools`); v != "v2" {
		t.Errorf("tools %q", v)
	}

	_, err := db.ExecContext(testContext(t), `INSERT INTO alicia_mcp_servers (name, transport) VALUES ('fs', 'stdio')`)
	wantPgError(t, err, checkViolation, "stdio MCP server without command")
	exec(t, db, `INSERT INTO alicia_mcp_servers (name, transport, command, args) VALUES ('fs', 'stdio', 'mcp-fs', ARRAY['--root', '/tmp'])`)
}

func TestMemoryVectorSearch(t *testing.T) {
	t.Parallel()
	db := migratedDB(t)
	ctx := testContext(t)

	vec := func(hot int) string {
		parts := make([]string, 1024)
		for i := range parts {
			parts[i] = "0"
			if i == hot {
				parts[i] = "1"
			}
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	exec(t, db, `INSERT INTO alicia_memory (id, content, embeddings, tags) VALUES ('amem_a', 'a', $1::vector, ARRAY['food'])`, vec(0))
	exec(t, db, `INSERT INTO alicia_memory (id, content, embeddings, tags) VALUES ('amem_b', 'b', $1::vector, ARRAY['work'])`, vec(1))
	near := scalar[string](t, db, `SELECT id FROM alicia_memory WHERE deleted_at IS NULL
		ORDER BY embeddings <=> $1::vector LIMIT 1`, vec(1))
	if near != "amem_b" {
		t.Errorf("nearest = %s, want amem_b", near)
	}
	if v := scalar[string](t, db, `SELECT id FROM alicia_memory WHERE tags @> ARRAY['food']`); v != "amem_a" {
		t.Errorf("tag search = %s", v)
	}
	_, err := db.ExecContext(ctx, `INSERT INTO alicia_memory (content, embeddings) VALUES ('bad', '[1,2,3]')`)
	wantPgError(t, err, "22000", "embedding of the wrong dimension")
}
