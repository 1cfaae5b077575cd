package backupcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/migrations"
	"github.com/alicia-voice/alicia/pkg/localpg"
)

// Part selects what a restore puts back.
type Part string

// The parts.
const (
	PartAll       Part = ""
	PartPostgres  Part = "postgres"
	PartJetStream Part = "jetstream"
)

// RestoreOptions say what to restore where.
type RestoreOptions struct {
	// NATS is a connection as a user allowed the JetStream API (admin).
	NATS *nats.Conn
	// PostgresURL must be a superuser's (compose: postgres_url): it makes
	// the roles, loads the rows as they were and binds the offsets.
	PostgresURL string
	// Roles, when set, are made (or given these passwords) and the schema
	// is migrated as Roles.Migrator, as `alicia migrate up` does.
	Roles *localpg.RoleURLs
	// Replace allows a database with tables and existing streams: they are
	// dropped first. Without it both must be empty.
	Replace bool
	// Only restores one part, under the other part as it is: refused when
	// the database would then be ahead of its stream.
	Only Part
	// Replicas of the restored streams (ALICIA_STREAM_REPLICAS; default 1).
	Replicas int
	Log      zerolog.Logger
}

// Restore puts the backup in dir back. Nothing is changed until the
// backup's files are verified and every check passed: the services are
// stopped, the targets are empty (or Replace), the schema version is one
// this alicia knows, and the database will not be ahead of its streams.
func Restore(ctx context.Context, o RestoreOptions, dir string) error {
	if err := restore(ctx, o, dir); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	return nil
}

func restore(ctx context.Context, o RestoreOptions, dir string) error {
	if o.Only != PartAll && o.Only != PartPostgres && o.Only != PartJetStream {
		return fmt.Errorf("--only %q: want postgres or jetstream", o.Only)
	}
	m, err := ReadManifest(dir)
	if err != nil {
		return err
	}
	r := &restoration{o: o, dir: dir, m: m, doPG: o.Only != PartJetStream, doJS: o.Only != PartPostgres, replacePG: o.Replace}
	if err := r.checkBackup(); err != nil {
		return err
	}
	defer r.close()
	if err := r.checkTargets(ctx); err != nil {
		return err
	}
	if err := r.checkOrder(ctx); err != nil {
		return err
	}
	// The streams, then the database with the offsets bound to them: a
	// failure in between leaves streams without their database, from which
	// persistence rebuilds one (never a database ahead of its streams).
	if err := r.restoreStreams(ctx); err != nil {
		return err
	}
	return r.restoreDatabase(ctx)
}

// restoration is one restore, phase by phase: nothing is changed until
// checkBackup, checkTargets and checkOrder have passed.
type restoration struct {
	o          RestoreOptions
	dir        string
	m          Manifest
	doPG, doJS bool

	// Found by checkTargets.
	conn      *pgx.Conn
	pg        *pgTarget
	js        jetstream.JetStream
	live      map[string]jetstream.Stream // the Alicia streams there are now
	offsets   []StreamOffset              // the database the streams will be under
	replacePG bool

	// Found by checkOrder: the backup's streams the database's offsets
	// name, bound to their restored identities by restoreStreams.
	bindings []binding
}

func (r *restoration) close() {
	if r.conn != nil {
		r.conn.Close(context.Background())
	}
}

// checkBackup: the backup is whole and consistent in itself, and of a
// schema this alicia knows.
func (r *restoration) checkBackup() error {
	m := r.m
	var sums []FileSum
	if r.doPG {
		for _, t := range m.Postgres.Tables {
			sums = append(sums, t.FileSum)
		}
	}
	if r.doJS {
		for _, s := range m.Streams {
			sums = append(sums, s.FileSum)
		}
	}
	for _, s := range sums {
		if err := s.verify(r.dir); err != nil {
			return err
		}
	}
	if c := compare(m.Postgres.StreamOffsets, identities(m.Streams)); len(c.ahead) > 0 {
		return fmt.Errorf("the backup's database is ahead of its streams, which a backup made by alicia never is: %s", strings.Join(c.ahead, "; "))
	}
	for _, name := range required {
		if r.doJS && !slices.ContainsFunc(m.Streams, func(s StreamDump) bool { return s.Name == name }) {
			return fmt.Errorf("the backup has no stream %s", name)
		}
	}
	if r.doPG {
		versions, err := migrations.Versions()
		if err != nil {
			return err
		}
		if !slices.Contains(versions, m.Postgres.SchemaVersion) {
			return fmt.Errorf("the backup's schema version %d is not among this alicia's migrations (%d to %d): restore with the Alicia release that made the backup, or a later one",
				m.Postgres.SchemaVersion, versions[0], versions[len(versions)-1])
		}
	}
	return nil
}

// checkTargets: the database and the NATS server are reachable, the
// services stopped, and what is restored goes where nothing is, or is
// replaced (--replace).
func (r *restoration) checkTargets(ctx context.Context) error {
	o := r.o
	conn, err := pgx.Connect(ctx, o.PostgresURL)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	r.conn = conn
	pg := &pgTarget{superURL: o.PostgresURL, roles: o.Roles, conn: conn}
	r.pg = pg
	var super bool
	if err := conn.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&super); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if !super {
		return errors.New("ALICIA_POSTGRES_URL is not a superuser's: a restore loads rows as they were (no triggers) and makes the roles; use the superuser's URL (compose: postgres_url)")
	}
	sessions, err := pg.serviceSessionsAfter(ctx, sessionsGoneWait)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if len(sessions) > 0 {
		return fmt.Errorf("the services are still connected to the database (%s): stop them first (docker compose stop persistence gateway llm memory asr tts room-agent)", strings.Join(sessions, ", "))
	}
	if r.js, err = jetstream.New(o.NATS); err != nil {
		return err
	}
	r.live = map[string]jetstream.Stream{}
	for _, name := range append(append([]string{}, Streams...), Derived...) {
		s, err := r.js.Stream(ctx, name)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
		case err != nil:
			return fmt.Errorf("stream %s: %w", name, err)
		default:
			r.live[name] = s
		}
	}
	if r.doJS {
		if err := checkStreamsReplaceable(ctx, r.live, o.Replace); err != nil {
			return err
		}
	}
	if !r.doPG {
		if r.offsets, err = pg.liveOffsets(ctx); err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		return nil
	}
	objs, err := pg.existingObjects(ctx)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if len(objs) > 0 && !o.Replace {
		// A schema without a row (the migrate job ran on a new volume)
		// loses nothing when it is replaced.
		full, err := pg.tablesWithRows(ctx)
		if err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		if len(full) > 0 {
			return fmt.Errorf("the database already holds rows (in %s): restore into a new database, or pass --replace to drop everything in its schema public first",
				strings.Join(firstOf(full, 5), ", "))
		}
		o.Log.Info().Int("objects", len(objs)).Msg("the database has a schema but no rows: it is replaced")
		r.replacePG = true
	}
	r.offsets = r.m.Postgres.StreamOffsets
	return nil
}

// checkOrder: the database must not be ahead of its streams — the
// backup's when the streams are restored, the ones there are otherwise.
func (r *restoration) checkOrder(ctx context.Context) error {
	o, m := r.o, r.m
	if !r.doJS {
		streams := map[string]streamID{}
		for name, s := range r.live {
			info, err := s.Info(ctx)
			if err != nil {
				return fmt.Errorf("stream %s: %w", name, err)
			}
			streams[name] = streamID{streamIdentity(info.Created), info.State.LastSeq}
		}
		c := compare(r.offsets, streams)
		if len(c.ahead) > 0 {
			return fmt.Errorf("the backup's database is ahead of the streams there are now, which would lose or repeat envelopes: %s", strings.Join(c.ahead, "; "))
		}
		for _, w := range c.unbound {
			o.Log.Warn().Msg(w)
		}
		return nil
	}
	c := compare(r.offsets, identities(m.Streams))
	if !r.doPG && (len(c.unbound) > 0 || len(c.ahead) > 0) {
		return fmt.Errorf("these streams cannot go under the database as it is, which is ahead of them or was made from other streams; restore the database from the same backup too (no --only): %s",
			strings.Join(append(c.ahead, c.unbound...), "; "))
	}
	for _, w := range c.unbound {
		o.Log.Warn().Msg(w)
	}
	for _, s := range m.Streams {
		var cfg struct {
			MaxAge time.Duration `json:"max_age"`
		}
		if json.Unmarshal(s.Config, &cfg) == nil && cfg.MaxAge > 0 && time.Since(m.Created) > cfg.MaxAge {
			o.Log.Warn().Str("stream", s.Name).Dur("max_age", cfg.MaxAge).Time("backup", m.Created).
				Msg("the backup is older than the stream's age limit: the server drops its envelopes as they are restored, and persistence never applies those the database had not (raise ALICIA_STREAM_MAX_AGE first to keep them)")
		}
		if c.bound[s.Name] {
			r.bindings = append(r.bindings, binding{Stream: s.Name, From: s.Created})
		}
	}
	return nil
}

// restoreStreams replaces the Alicia streams there are with the backup's
// (not the sessions: they would revive sessions signed out since).
func (r *restoration) restoreStreams(ctx context.Context) error {
	if !r.doJS {
		return nil
	}
	o := r.o
	for _, name := range append(append([]string{}, Streams...), Derived...) {
		if s, ok := r.live[name]; ok {
			if err := r.js.DeleteStream(ctx, s.CachedInfo().Config.Name); err != nil {
				return fmt.Errorf("replace stream %s: %w", name, err)
			}
			o.Log.Info().Str("stream", name).Msg("stream removed")
		}
	}
	for _, s := range r.m.Streams {
		if s.Name == SessionsStream {
			o.Log.Info().Str("stream", s.Name).Msg("sessions not restored: they would revive sessions signed out since the backup; people sign in again")
			continue
		}
		created, err := restoreOne(ctx, o, r.dir, s)
		if err != nil {
			return err
		}
		for i := range r.bindings {
			if r.bindings[i].Stream == s.Name {
				r.bindings[i].To = created
			}
		}
	}
	return nil
}

// restoreDatabase loads the backup's database with its offsets bound to
// the restored streams, or (--only jetstream) binds the database's
// offsets there are to them.
func (r *restoration) restoreDatabase(ctx context.Context) error {
	o, m := r.o, r.m
	if r.doPG {
		start := time.Now()
		if err := r.pg.restore(ctx, r.dir, m.Postgres, r.replacePG, r.bindings); err != nil {
			return fmt.Errorf("postgres: %w (the database may be half made: run the restore again with --replace)", err)
		}
		var rows int64
		for _, t := range m.Postgres.Tables {
			rows += t.Rows
		}
		o.Log.Info().Int64("schema_version", m.Postgres.SchemaVersion).Int("tables", len(m.Postgres.Tables)).Int64("rows", rows).
			Dur("took", time.Since(start)).Msg("database restored")
		return nil
	}
	if len(r.bindings) > 0 {
		n, err := r.pg.rebind(ctx, r.bindings)
		if err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		o.Log.Info().Int64("offsets", n).Msg("the database's offsets now name the restored streams")
	}
	return nil
}

// checkStreamsReplaceable: without replace no Alicia stream may hold a
// message (empty ones, made by services that started on a new volume, are
// replaced: nothing is lost); with it, any may. Either way none may still
// be read by a running service (a durable consumer with pull requests
// waiting).
func checkStreamsReplaceable(ctx context.Context, live map[string]jetstream.Stream, replace bool) error {
	var names, full []string
	for name := range live {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		info, err := live[name].Info(ctx)
		if err != nil {
			return fmt.Errorf("stream %s: %w", name, err)
		}
		if info.State.Msgs > 0 {
			full = append(full, fmt.Sprintf("%s (%d messages)", name, info.State.Msgs))
		}
	}
	if len(full) > 0 && !replace {
		return fmt.Errorf("the NATS server already has streams with messages, %s: restore into an empty JetStream store, or pass --replace to delete them first", strings.Join(full, ", "))
	}
	for _, name := range names {
		l := live[name].ListConsumers(ctx)
		var busy []string
		for ci := range l.Info() {
			if ci.NumWaiting > 0 && ci.Config.Durable != "" {
				busy = append(busy, ci.Name)
			}
		}
		if err := l.Err(); err != nil {
			return fmt.Errorf("consumers of %s: %w", name, err)
		}
		if len(busy) > 0 {
			return fmt.Errorf("a service still reads %s (consumers %s wait for messages): stop the services first", name, strings.Join(busy, ", "))
		}
	}
	return nil
}

// restoreOne restores one stream with ALICIA_STREAM_REPLICAS replicas and
// returns its new identity.
func restoreOne(ctx context.Context, o RestoreOptions, dir string, s StreamDump) (string, error) {
	var cfg map[string]any
	if err := json.Unmarshal(s.Config, &cfg); err != nil {
		return "", fmt.Errorf("stream %s: config: %w", s.Name, err)
	}
	// A backup of a three-node cluster restores onto one server, and the
	// other way round: the services would set this count anyway.
	cfg["num_replicas"] = max(o.Replicas, 1)
	raw, err := json.Marshal(cfg)
	if err != nil {
		return "", err
	}
	f, err := s.open(dir)
	if err != nil {
		return "", err
	}
	defer f.Close() //nolint:errcheck // only read
	start := time.Now()
	created, st, err := restoreStream(ctx, o.NATS, s.Name, raw, s.State, f)
	if err != nil {
		return "", err
	}
	if st.LastSeq != s.LastSeq || st.Messages != s.Messages {
		return "", fmt.Errorf("stream %s restored with %d messages up to %d, the backup has %d up to %d", s.Name, st.Messages, st.LastSeq, s.Messages, s.LastSeq)
	}
	o.Log.Info().Str("stream", s.Name).Uint64("messages", st.Messages).Uint64("last_seq", st.LastSeq).Int("consumers", st.Consumers).
		Dur("took", time.Since(start)).Msg("stream restored")
	return streamIdentity(created), nil
}

func firstOf(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], "…")
	}
	return s
}
