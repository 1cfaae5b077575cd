package backupcmd

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", for goose
	"github.com/klauspost/compress/zstd"

	"github.com/alicia-voice/alicia/migrations"
	"github.com/alicia-voice/alicia/pkg/localpg"
)

// PostgresDump is the database part of a backup: every table of schema
// public (each a binary COPY, zstd-compressed), the sequences, the schema
// version the tables have, and the stream offsets persistence had stored,
// all from one snapshot (a REPEATABLE READ transaction).
type PostgresDump struct {
	Database      string         `json:"database"`
	ServerVersion string         `json:"server_version"`
	SchemaVersion int64          `json:"schema_version"`
	Tables        []TableDump    `json:"tables"`
	Sequences     []SequenceDump `json:"sequences"`
	StreamOffsets []StreamOffset `json:"stream_offsets"`
}

// TableDump is one table's rows.
type TableDump struct {
	Name    string   `json:"name"`
	Columns []Column `json:"columns"`
	Rows    int64    `json:"rows"`
	FileSum
}

// Column is a column the COPY carries, with its type as format_type
// prints it: a restore loads only into a table with the same columns.
type Column struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// SequenceDump is a sequence's position.
type SequenceDump struct {
	Name      string `json:"name"`
	LastValue int64  `json:"last_value"`
	IsCalled  bool   `json:"is_called"`
}

// StreamOffset is a row of alicia_stream_offsets: how far persistence had
// applied a stream (LastSeq), and which stream that was (StreamCreated,
// the stream's creation time as persistence records it; empty on rows
// older than stream identities).
type StreamOffset struct {
	Stream        string `json:"stream"`
	Consumer      string `json:"consumer"`
	LastSeq       uint64 `json:"last_seq"`
	StreamCreated string `json:"stream_created"`
	Epoch         int    `json:"epoch"`
}

// notExtension keeps out of a pg_class query the objects an extension
// (pgvector) owns: the extension makes them again.
const notExtension = `NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e')`

// gooseTable is goose's version table: a restore makes it by migrating to
// the backup's version, so its rows are not copied.
const gooseTable = "goose_db_version"

// dumpPostgres writes every table of the database conn is connected to
// into dir/postgres/ and returns what it wrote, all read in one snapshot.
func dumpPostgres(ctx context.Context, conn *pgx.Conn, dir string) (PostgresDump, error) {
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return PostgresDump{}, err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	var d PostgresDump
	if err := tx.QueryRow(ctx, `SELECT current_database(), current_setting('server_version')`).Scan(&d.Database, &d.ServerVersion); err != nil {
		return PostgresDump{}, err
	}
	if d.SchemaVersion, err = schemaVersion(ctx, tx); err != nil {
		return PostgresDump{}, err
	}
	tables, err := listTables(ctx, tx)
	if err != nil {
		return PostgresDump{}, err
	}
	for _, name := range tables {
		cols, err := columns(ctx, tx, name)
		if err != nil {
			return PostgresDump{}, err
		}
		t := TableDump{Name: name, Columns: cols}
		t.FileSum, err = writeFile(dir, "postgres/"+name+".copy.zst", func(w io.Writer) error {
			zw, err := zstd.NewWriter(w)
			if err != nil {
				return err
			}
			tag, err := tx.Conn().PgConn().CopyTo(ctx, zw, "COPY "+qualified(name)+" ("+columnList(cols)+") TO STDOUT (FORMAT binary)")
			if err != nil {
				return errors.Join(fmt.Errorf("copy %s: %w", name, err), zw.Close())
			}
			t.Rows = tag.RowsAffected()
			return zw.Close()
		})
		if err != nil {
			return PostgresDump{}, err
		}
		d.Tables = append(d.Tables, t)
	}
	rows, err := tx.Query(ctx, `SELECT c.relname FROM pg_class c
		WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'S' AND `+notExtension+` ORDER BY c.relname`)
	if err != nil {
		return PostgresDump{}, err
	}
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return PostgresDump{}, err
	}
	for _, name := range seqs {
		s := SequenceDump{Name: name}
		if err := tx.QueryRow(ctx, "SELECT last_value, is_called FROM "+qualified(name)).Scan(&s.LastValue, &s.IsCalled); err != nil {
			return PostgresDump{}, fmt.Errorf("sequence %s: %w", name, err)
		}
		d.Sequences = append(d.Sequences, s)
	}
	if d.StreamOffsets, err = streamOffsets(ctx, tx); err != nil {
		return PostgresDump{}, err
	}
	return d, tx.Commit(ctx)
}

// schemaVersion is the newest migration applied (goose appends a row per
// up and per down; a version's newest row says whether it is applied).
func schemaVersion(ctx context.Context, q pgx.Tx) (int64, error) {
	var exists bool
	if err := q.QueryRow(ctx, `SELECT to_regclass('public.goose_db_version') IS NOT NULL`).Scan(&exists); err != nil {
		return 0, err
	}
	if !exists {
		return 0, errors.New("the database has no Alicia schema (no goose_db_version table): run `alicia migrate up` first, or point ALICIA_POSTGRES_URL at Alicia's database")
	}
	var v int64
	err := q.QueryRow(ctx, `SELECT COALESCE(max(version_id), 0) FROM (SELECT DISTINCT ON (version_id) version_id, is_applied
		FROM goose_db_version ORDER BY version_id, id DESC) v WHERE is_applied AND version_id > 0`).Scan(&v)
	return v, err
}

// listTables names the tables of schema public the backup copies.
func listTables(ctx context.Context, q pgx.Tx) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT c.relname FROM pg_class c
		WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r' AND c.relname <> $1 AND `+notExtension+`
		ORDER BY c.relname`, gooseTable)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// columns are a table's stored columns in order (generated ones are left
// out: COPY cannot load them, the table computes them again).
func columns(ctx context.Context, q pgx.Tx, table string) ([]Column, error) {
	rows, err := q.Query(ctx, `SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
		WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped AND attgenerated = '' ORDER BY attnum`, qualified(table))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Column, error) {
		var c Column
		err := r.Scan(&c.Name, &c.Type)
		return c, err
	})
}

// streamOffsets reads alicia_stream_offsets whatever columns the schema
// version gives it (stream_created and epoch came with migration 8).
func streamOffsets(ctx context.Context, q pgx.Tx) ([]StreamOffset, error) {
	var exists bool
	if err := q.QueryRow(ctx, `SELECT to_regclass('public.alicia_stream_offsets') IS NOT NULL`).Scan(&exists); err != nil || !exists {
		return nil, err
	}
	rows, err := q.Query(ctx, `SELECT to_jsonb(o) FROM alicia_stream_offsets o ORDER BY stream, consumer`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (StreamOffset, error) {
		var raw []byte
		var o StreamOffset
		if err := r.Scan(&raw); err != nil {
			return o, err
		}
		return o, json.Unmarshal(raw, &o)
	})
}

func qualified(name string) string { return pgx.Identifier{"public", name}.Sanitize() }

func columnList(cols []Column) string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = pgx.Identifier{c.Name}.Sanitize()
	}
	return strings.Join(names, ", ")
}

// pgTarget is the database a restore writes, as its superuser.
type pgTarget struct {
	superURL string
	roles    *localpg.RoleURLs // nil: the migrations run as the superuser
	conn     *pgx.Conn
}

// serviceSessions lists the services' roles logged in to the database: a
// restore must not run under a live persistence, gateway, llm or memory.
func (p *pgTarget) serviceSessions(ctx context.Context) ([]string, error) {
	u, err := url.Parse(p.superURL)
	if err != nil {
		return nil, err
	}
	r := localpg.RolesFor(strings.TrimPrefix(u.Path, "/"))
	rows, err := p.conn.Query(ctx, `SELECT format('%s (%s sessions)', usename, count(*)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND usename = ANY($1) GROUP BY usename ORDER BY usename`,
		[]string{r.Migrator, r.Writer, r.Reader})
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// sessionsGoneWait is how long a restore lets the services' sessions end
// before it refuses: a session whose client has just disconnected (a
// restore's own, a service stopped a moment ago) is still listed until its
// server process has exited.
const sessionsGoneWait = 3 * time.Second

// serviceSessionsAfter is serviceSessions once they are gone, or as they
// still are after wait.
func (p *pgTarget) serviceSessionsAfter(ctx context.Context, wait time.Duration) ([]string, error) {
	deadline := time.Now().Add(wait)
	for {
		sessions, err := p.serviceSessions(ctx)
		if err != nil || len(sessions) == 0 || time.Now().After(deadline) {
			return sessions, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// existingObjects names what schema public holds besides the extensions'
// objects: a restore goes only into an empty database, or replaces it.
func (p *pgTarget) existingObjects(ctx context.Context) ([]string, error) {
	rows, err := p.conn.Query(ctx, `SELECT c.relname FROM pg_class c
		WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S') AND `+notExtension+`
		ORDER BY c.relname`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// tablesWithRows names the tables of schema public holding a row.
func (p *pgTarget) tablesWithRows(ctx context.Context) ([]string, error) {
	tx, err := p.conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	tables, err := listTables(ctx, tx)
	if err != nil {
		return nil, err
	}
	var full []string
	for _, t := range tables {
		var any bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT FROM "+qualified(t)+")").Scan(&any); err != nil {
			return nil, fmt.Errorf("%s: %w", t, err)
		}
		if any {
			full = append(full, t)
		}
	}
	return full, nil
}

// liveOffsets reads the stream offsets of the database as it is (for a
// restore of the streams alone, under this database).
func (p *pgTarget) liveOffsets(ctx context.Context) ([]StreamOffset, error) {
	tx, err := p.conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	return streamOffsets(ctx, tx)
}

// binding moves a stream's offsets from the stream identity they were
// stored for (From, the backed-up stream's creation time) to the restored
// stream's (To): the same messages at the same sequences.
type binding struct{ Stream, From, To string }

// bindOffsets applies bindings in tx.
func bindOffsets(ctx context.Context, tx pgx.Tx, bindings []binding) (int64, error) {
	var n int64
	for _, b := range bindings {
		tag, err := tx.Exec(ctx, `UPDATE alicia_stream_offsets SET stream_created = $3 WHERE stream = $1 AND stream_created = $2`, b.Stream, b.From, b.To)
		if err != nil {
			return n, fmt.Errorf("offsets of %s: %w", b.Stream, err)
		}
		n += tag.RowsAffected()
	}
	return n, nil
}

// rebind binds the live database's offsets to restored streams.
func (p *pgTarget) rebind(ctx context.Context, bindings []binding) (int64, error) {
	var n int64
	err := pgx.BeginFunc(ctx, p.conn, func(tx pgx.Tx) error {
		var err error
		n, err = bindOffsets(ctx, tx, bindings)
		return err
	})
	return n, err
}

// restore makes the schema at the dump's version (as the migrator when the
// roles are given, which then own it as after `alicia migrate up`), loads
// every table and sequence, and binds the offsets, in one transaction: the
// database has the whole backup or nothing of it.
func (p *pgTarget) restore(ctx context.Context, dir string, d PostgresDump, replace bool, bindings []binding) error {
	if replace {
		// Everything Alicia made lives in schema public (the vector
		// extension too: RolesSQL or the first migration make it again).
		if _, err := p.conn.Exec(ctx, `DROP SCHEMA public CASCADE;
			CREATE SCHEMA public AUTHORIZATION pg_database_owner;
			GRANT USAGE ON SCHEMA public TO PUBLIC;`); err != nil {
			return fmt.Errorf("replace the database: %w", err)
		}
	}
	migrateURL := p.superURL
	if p.roles != nil {
		if err := localpg.SetRoles(ctx, p.superURL, *p.roles); err != nil {
			return err
		}
		migrateURL = p.roles.Migrator
	}
	db, err := sql.Open("pgx", migrateURL)
	if err != nil {
		return err
	}
	defer db.Close()
	prov, err := migrations.NewProvider(db)
	if err != nil {
		return err
	}
	if _, err := prov.UpTo(ctx, d.SchemaVersion); err != nil {
		return fmt.Errorf("migrate to the backup's schema version %d: %w", d.SchemaVersion, err)
	}
	err = pgx.BeginFunc(ctx, p.conn, func(tx pgx.Tx) error {
		// The rows go in as they were: no trigger changes them (updated_at)
		// and foreign keys are not checked row by row (they held in the
		// snapshot the rows come from).
		if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
			return err
		}
		live, err := listTables(ctx, tx)
		if err != nil {
			return err
		}
		var names []string
		for _, t := range d.Tables {
			names = append(names, t.Name)
		}
		if !slices.Equal(live, names) {
			return fmt.Errorf("the tables at schema version %d are %v, the backup's are %v", d.SchemaVersion, live, names)
		}
		quoted := make([]string, len(names))
		for i, n := range names {
			quoted[i] = qualified(n)
		}
		if len(quoted) > 0 {
			// What the migrations themselves inserted is in the backup too.
			if _, err := tx.Exec(ctx, "TRUNCATE "+strings.Join(quoted, ", ")); err != nil {
				return err
			}
		}
		for _, t := range d.Tables {
			if err := loadTable(ctx, tx, dir, t); err != nil {
				return err
			}
		}
		for _, s := range d.Sequences {
			if _, err := tx.Exec(ctx, `SELECT setval($1::regclass, $2, $3)`, qualified(s.Name), s.LastValue, s.IsCalled); err != nil {
				return fmt.Errorf("sequence %s: %w", s.Name, err)
			}
		}
		_, err = bindOffsets(ctx, tx, bindings)
		return err
	})
	if err != nil {
		return err
	}
	// Fresh statistics for the planner (the HNSW index is built already).
	_, err = p.conn.Exec(ctx, "ANALYZE")
	return err
}

// loadTable copies a table's rows from its file into the table, which must
// have the columns the backup recorded.
func loadTable(ctx context.Context, tx pgx.Tx, dir string, t TableDump) error {
	cols, err := columns(ctx, tx, t.Name)
	if err != nil {
		return err
	}
	if !slices.Equal(cols, t.Columns) {
		return fmt.Errorf("table %s has columns %v, the backup's are %v", t.Name, cols, t.Columns)
	}
	f, err := t.open(dir)
	if err != nil {
		return err
	}
	defer f.Close() //nolint:errcheck // only read
	zr, err := zstd.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: %w", t.File, err)
	}
	defer zr.Close()
	tag, err := tx.Conn().PgConn().CopyFrom(ctx, zr, "COPY "+qualified(t.Name)+" ("+columnList(t.Columns)+") FROM STDIN (FORMAT binary)")
	if err != nil {
		return fmt.Errorf("load %s: %w", t.Name, err)
	}
	if tag.RowsAffected() != t.Rows {
		return fmt.Errorf("load %s: %d rows, the backup has %d", t.Name, tag.RowsAffected(), t.Rows)
	}
	return nil
}
