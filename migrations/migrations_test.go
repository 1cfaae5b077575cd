package migrations_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/alicia-voice/alicia/migrations"
	"github.com/alicia-voice/alicia/pkg/localpg"
)

var (
	serverOnce sync.Once
	serverAddr string
	serverErr  error
)

// serverURL starts (or reuses) the test server once per process.
func serverURL() (string, error) {
	serverOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		serverAddr, serverErr = localpg.Ensure(ctx, localpg.Options{})
	})
	return serverAddr, serverErr
}

// newDB creates a fresh, empty database on the test server
// (ALICIA_POSTGRES_URL, else the private cluster of pkg/localpg) and drops it
// when the test ends. It returns a *sql.DB (pgx stdlib driver)
// connected to it. Every call creates a new database, so tests can run in
// parallel.
func newDB(t *testing.T) *sql.DB {
	t.Helper()
	adminURL, err := serverURL()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no PostgreSQL 17 + pgvector server for the migration tests: %v", err)
		}
		t.Skipf("no PostgreSQL 17 + pgvector server (set ALICIA_POSTGRES_URL or run as root with debootstrap): %v", err)
	}
	cfg, err := pgx.ParseConfig(adminURL)
	if err != nil {
		t.Fatalf("parse server URL: %v", err)
	}
	admin := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { _ = admin.Close() })

	var buf [8]byte
	if _, err := rand.Read(buf[:]); err != nil {
		t.Fatal(err)
	}
	name := "alicia_migtest_" + hex.EncodeToString(buf[:])
	// CREATE DATABASE takes an identifier, not a parameter: the name is
	// generated here and quoted with pgx.Identifier.
	ident := pgx.Identifier{name}.Sanitize()
	ctx := testContext(t)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+ident); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	dbCfg := cfg.Copy()
	dbCfg.Database = name
	db := stdlib.OpenDB(*dbCfg)
	t.Cleanup(func() {
		_ = db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
	})
	return db
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

var wantTables = []string{
	"alicia_audio",
	"alicia_conversations",
	"alicia_dimension_preferences",
	"alicia_learning_consents",
	"alicia_mcp_servers",
	"alicia_memory",
	"alicia_memory_used",
	"alicia_message_judgements",
	"alicia_messages",
	"alicia_meta",
	"alicia_notes",
	"alicia_persistence_instances",
	"alicia_prompt_versions",
	"alicia_reasoning_steps",
	"alicia_sentences",
	"alicia_session_stats",
	"alicia_stream_offsets",
	"alicia_timers",
	"alicia_tool_uses",
	"alicia_tools",
	"alicia_user_conversation_commentaries",
	"alicia_user_settings",
	"alicia_votes",
	// The optimiser's tables keep the seeds' names (00012).
	"prompt_candidates",
	"prompt_evaluations",
	"prompt_optimization_runs",
}

var wantEnums = map[string][]string{
	"conversation_status":  {"active", "archived", "deleted"},
	"message_role":         {"user", "assistant", "system"},
	"completion_status":    {"pending", "streaming", "completed", "failed"},
	"sync_status":          {"pending", "synced", "conflict"},
	"audio_type":           {"input", "output"},
	"playout_status":       {"pending", "played", "interrupted", "unplayed"},
	"mcp_transport":        {"stdio", "http"},
	"mcp_server_status":    {"unknown", "connecting", "connected", "disconnected", "error"},
	"tool_use_status":      {"pending", "running", "success", "error", "cancelled"},
	"tool_execution":       {"server", "client", "either"},
	"vote_value":           {"up", "down", "critical"},
	"feedback_target_type": {"message", "sentence", "tool_use", "memory", "reasoning", "memory_usage"},
	"note_category":        {"improvement", "correction", "context", "general"},
}

// The UNIQUE constraints the persistence service uses as ON CONFLICT targets.
var wantUnique = map[string]string{
	"alicia_conversations_livekit_room_name_key":  "UNIQUE (livekit_room_name)",
	"alicia_messages_conversation_id_id_key":      "UNIQUE (conversation_id, id)",
	"alicia_messages_local_id_key":                "UNIQUE (conversation_id, local_id)",
	"alicia_messages_server_id_key":               "UNIQUE (server_id)",
	"alicia_sentences_message_sequence_key":       "UNIQUE (message_id, sentence_sequence_number)",
	"alicia_meta_ref_key_key":                     "UNIQUE (ref, key)",
	"alicia_mcp_servers_name_key":                 "UNIQUE (name)",
	"alicia_tools_name_key":                       "UNIQUE (name)",
	"alicia_reasoning_steps_message_sequence_key": "UNIQUE (message_id, sequence_number)",
	"alicia_votes_user_target_key":                "UNIQUE NULLS NOT DISTINCT (user_id, target_type, target_id)",
}

func queryStrings(t *testing.T, db *sql.DB, query string, args ...any) []string {
	t.Helper()
	rows, err := db.QueryContext(testContext(t), query, args...)
	if err != nil {
		t.Fatalf("query %q: %v", query, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func aliciaTables(t *testing.T, db *sql.DB) []string {
	return queryStrings(t, db, `SELECT table_name FROM information_schema.tables
		WHERE table_schema = current_schema() AND (table_name LIKE 'alicia\_%' OR table_name LIKE 'prompt\_%') ORDER BY table_name COLLATE "C"`)
}

func enumValues(t *testing.T, db *sql.DB, name string) []string {
	return queryStrings(t, db, `SELECT e.enumlabel FROM pg_enum e JOIN pg_type ty ON ty.oid = e.enumtypid
		WHERE ty.typname = $1 AND ty.typnamespace = current_schema()::regnamespace ORDER BY e.enumsortorder`, name)
}

type indexInfo struct {
	table, method, firstOpclass, def string
	partial                          bool
}

func aliciaIndexes(t *testing.T, db *sql.DB) map[string]indexInfo {
	t.Helper()
	rows, err := db.QueryContext(testContext(t), `
		SELECT ic.relname, tc.relname, am.amname, opc.opcname, pg_get_indexdef(i.indexrelid), i.indpred IS NOT NULL
		FROM pg_index i
		JOIN pg_class ic ON ic.oid = i.indexrelid
		JOIN pg_class tc ON tc.oid = i.indrelid
		JOIN pg_am am ON am.oid = ic.relam
		JOIN pg_opclass opc ON opc.oid = i.indclass[0]
		WHERE tc.relname LIKE 'alicia\_%' AND tc.relnamespace = current_schema()::regnamespace`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]indexInfo{}
	for rows.Next() {
		var name string
		var ii indexInfo
		if err := rows.Scan(&name, &ii.table, &ii.method, &ii.firstOpclass, &ii.def, &ii.partial); err != nil {
			t.Fatal(err)
		}
		out[name] = ii
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func checkSchema(t *testing.T, db *sql.DB) {
	t.Helper()
	if got := aliciaTables(t, db); !slices.Equal(got, wantTables) {
		t.Fatalf("tables:\n got  %v\n want %v", got, wantTables)
	}
	for name, want := range wantEnums {
		if got := enumValues(t, db, name); !slices.Equal(got, want) {
			t.Errorf("enum %s = %v, want %v", name, got, want)
		}
	}

	idx := aliciaIndexes(t, db)
	if ii := idx["idx_memory_embeddings_hnsw"]; ii.table != "alicia_memory" || ii.method != "hnsw" || ii.firstOpclass != "vector_cosine_ops" {
		t.Errorf("HNSW index on alicia_memory.embeddings: got %+v", ii)
	}
	if ii := idx["idx_memory_tags"]; ii.method != "gin" || !strings.Contains(ii.def, "(tags)") {
		t.Errorf("GIN index on alicia_memory.tags: got %+v", ii)
	}
	for name, pred := range map[string]string{
		"idx_sentences_message":           "WHERE (deleted_at IS NULL)",
		"idx_sentences_completion_status": "completion_status <> 'completed'::completion_status",
		"idx_sentences_orphaned":          "ARRAY['pending'::completion_status, 'streaming'::completion_status, 'failed'::completion_status]",
	} {
		ii := idx[name]
		if ii.table != "alicia_sentences" || !ii.partial || !strings.Contains(ii.def, pred) {
			t.Errorf("partial sentence index %s: got %+v, want predicate containing %q", name, ii, pred)
		}
	}
	// A trace leads to its rows (00009).
	for name, table := range map[string]string{
		"idx_messages_trace": "alicia_messages", "idx_sentences_trace": "alicia_sentences", "idx_tool_uses_trace": "alicia_tool_uses",
		"idx_reasoning_steps_trace": "alicia_reasoning_steps", "idx_memory_used_trace": "alicia_memory_used",
	} {
		ii := idx[name]
		if ii.table != table || !ii.partial || !strings.Contains(ii.def, "(trace_id) WHERE (trace_id IS NOT NULL)") {
			t.Errorf("partial trace index %s: got %+v", name, ii)
		}
	}
	for _, name := range []string{
		"alicia_conversations_livekit_room_name_key", "idx_messages_conversation_history",
		"idx_memory_used_message", "idx_tool_uses_message", "idx_tool_uses_status", "alicia_meta_ref_key_key",
		// The latest dimension preference of a scope (00013).
		"idx_dimension_preferences_installation", "idx_dimension_preferences_user",
	} {
		if _, ok := idx[name]; !ok {
			t.Errorf("index %s missing", name)
		}
	}

	rows, err := db.QueryContext(testContext(t), `SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint
		WHERE contype = 'u' AND connamespace = current_schema()::regnamespace`)
	if err != nil {
		t.Fatal(err)
	}
	gotUnique := map[string]string{}
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			t.Fatal(err)
		}
		gotUnique[name] = def
	}
	rows.Close()
	for name, def := range wantUnique {
		if gotUnique[name] != def {
			t.Errorf("unique constraint %s = %q, want %q", name, gotUnique[name], def)
		}
	}

	// Every table with updated_at has the trigger.
	missing := queryStrings(t, db, `SELECT c.table_name FROM information_schema.columns c
		WHERE c.table_schema = current_schema() AND c.column_name = 'updated_at'
		  AND NOT EXISTS (SELECT 1 FROM pg_trigger tg
		      WHERE tg.tgrelid = (quote_ident(c.table_schema) || '.' || quote_ident(c.table_name))::regclass
		        AND tg.tgfoid = 'alicia_set_updated_at'::regproc)`)
	if len(missing) > 0 {
		t.Errorf("tables with updated_at but no alicia_set_updated_at trigger: %v", missing)
	}
}

// migrationCount is the number of migration files, numbered 1..n.
const migrationCount = 15

func TestUpDownUp(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := testContext(t)

	if err := migrations.Up(ctx, db); err != nil {
		t.Fatal(err)
	}
	checkSchema(t, db)
	// Up is a no-op once everything is applied.
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatalf("second Up: %v", err)
	}

	var status bytes.Buffer
	if err := migrations.Status(ctx, db, &status); err != nil {
		t.Fatal(err)
	}
	t.Logf("status after Up:\n%s", status.String())
	if n := strings.Count(status.String(), " applied "); n != migrationCount {
		t.Errorf("status lists %d applied migrations, want %d:\n%s", n, migrationCount, status.String())
	}

	if err := migrations.Down(ctx, db); err != nil {
		t.Fatal(err)
	}
	if got := aliciaTables(t, db); len(got) != 0 {
		t.Errorf("tables left after Down: %v", got)
	}
	left := queryStrings(t, db, `SELECT typname::text FROM pg_type WHERE typnamespace = current_schema()::regnamespace
		AND typtype = 'e'`)
	if len(left) != 0 {
		t.Errorf("enums left after Down: %v", left)
	}
	left = queryStrings(t, db, `SELECT proname::text FROM pg_proc WHERE proname IN ('generate_random_id', 'alicia_set_updated_at')`)
	if len(left) != 0 {
		t.Errorf("functions left after Down: %v", left)
	}
	left = queryStrings(t, db, `SELECT extname::text FROM pg_extension WHERE extname = 'vector'`)
	if len(left) != 0 {
		t.Errorf("extension left after Down: %v", left)
	}
	status.Reset()
	if err := migrations.Status(ctx, db, &status); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(status.String(), " pending "); n != migrationCount {
		t.Errorf("status lists %d pending migrations after Down, want %d:\n%s", n, migrationCount, status.String())
	}

	if err := migrations.Up(ctx, db); err != nil {
		t.Fatalf("Up after Down: %v", err)
	}
	checkSchema(t, db)
}

// Services that start together all call Up; the advisory lock makes exactly
// one of them apply the migrations and the others find nothing pending.
func TestConcurrentUp(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := testContext(t)

	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = migrations.Up(ctx, db) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Up #%d: %v", i, err)
		}
	}
	p, err := migrations.NewProvider(db)
	if err != nil {
		t.Fatal(err)
	}
	version, err := p.GetDBVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if version != migrationCount {
		t.Errorf("db version = %d, want %d", version, migrationCount)
	}
	checkSchema(t, db)
}
