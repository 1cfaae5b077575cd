// Package backupcmd implements `alicia backup` and `alicia restore`: the
// database and the JetStream streams saved together, consistent with each
// other, and put back in the order that keeps them so.
//
// The order. persistence stores, in the same transaction as the rows, the
// stream sequence it has applied up to (alicia_stream_offsets), and resumes
// after it. A database older than its stream is therefore safe: persistence
// applies the envelopes after its offset again, and its writes are
// idempotent. A stream older than its database is not: the database would
// hold rows of envelopes the stream no longer has, and the sequences those
// had would be given to new envelopes. So a backup dumps the database first
// (one snapshot) and snapshots the streams after it, checks that every
// stored offset lies within its stream, and a restore refuses any
// combination where the database would be ahead of its stream.
//
// A restored stream keeps its messages, sequences and timestamps but gets
// a new creation time, which is how persistence recognises a stream
// (alicia_stream_offsets.stream_created): the restore binds the restored
// database's offsets to the restored streams, so persistence resumes after
// its offset instead of applying the whole stream again.
package backupcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/localpg"
	"github.com/alicia-voice/alicia/pkg/natsauth"
	"github.com/alicia-voice/alicia/services/cli/internal/migratecmd"
	"github.com/alicia-voice/alicia/services/cli/internal/opnats"
)

// FormatVersion is the manifest's format; a restore refuses others.
const FormatVersion = 1

// ManifestFile is the manifest's name in a backup directory.
const ManifestFile = "manifest.json"

// Streams are the streams a backup keeps, in the order it snapshots them:
// the record (CONVERSATIONS, then SYSTEM, where the memory service publishes
// what it makes of CONVERSATIONS) and the dead letters. The work queues are
// not kept: their work is stale by the time a backup is restored (ASR_JOBS,
// AGENT_DISPATCH), and LLM_TURNS sources CONVERSATIONS from where it stood,
// so a restored one would skip or repeat turns: the llm creates it anew,
// sourcing from its start.
//
// Nor are the web client's sessions (SessionsStream): a restored backup
// would bring back every session signed out or ended since it was made.
// A restore leaves the sessions bucket as it is: onto a new server, people
// sign in again; onto the running one, the sessions valid now stay and
// the revoked ones stay revoked.
var Streams = []string{bus.StreamConversations, bus.StreamSystem, bus.StreamDeadLetter}

// SessionsStream is the web client sessions' bucket, which backups made
// before it was left out hold: a restore skips it.
const SessionsStream = "KV_" + natsauth.SessionsBucket

// required are the streams a backup cannot do without.
var required = []string{bus.StreamConversations, bus.StreamSystem}

// Derived are the streams a restore removes (with --replace) and leaves for
// the services to make again: see Streams.
var Derived = []string{"LLM_TURNS", bus.StreamASRJobs, bus.StreamDispatch}

// Manifest describes a backup: what it holds and how the parts relate.
type Manifest struct {
	Format  int       `json:"format"`
	Created time.Time `json:"created"`
	// Order says, for a reader of the file, why the parts are as they are.
	Order    string       `json:"order"`
	Postgres PostgresDump `json:"postgres"`
	Streams  []StreamDump `json:"streams"`
}

// StreamDump is one stream's snapshot.
type StreamDump struct {
	Name string `json:"name"`
	// Created is the stream's creation time as persistence records it
	// (UTC, RFC 3339 with nanoseconds): the identity its offsets name.
	Created  string          `json:"created"`
	FirstSeq uint64          `json:"first_seq"`
	LastSeq  uint64          `json:"last_seq"`
	Messages uint64          `json:"messages"`
	Config   json.RawMessage `json:"config"`
	State    json.RawMessage `json:"state"`
	FileSum
}

const orderNote = "The database was dumped first, in one snapshot, and the streams after it: every offset the database stores lies within its stream, " +
	"so persistence, after a restore, applies again what the streams hold beyond the offsets (its writes are idempotent). " +
	"Never restore these streams under a database newer than this one, nor this database with streams older than these."

// streamIdentity formats a stream's creation time as persistence stores it.
func streamIdentity(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// Options say where the backup goes and with what it connects.
type Options struct {
	// NATS is a connection as a user allowed the JetStream API (admin).
	NATS *nats.Conn
	// PostgresURL is the database's: a superuser's (compose: postgres_url),
	// or any role that reads every table and sequence.
	PostgresURL string
	Log         zerolog.Logger
}

// Backup writes a backup into a new directory under parent and returns its
// path: alicia-backup-<UTC time>, which appears only once complete (it is
// written as .<name>.partial and renamed).
func Backup(ctx context.Context, o Options, parent string) (string, error) {
	now := time.Now().UTC()
	name := "alicia-backup-" + now.Format("20060102T150405Z")
	final := filepath.Join(parent, name)
	if _, err := os.Stat(final); err == nil {
		return "", fmt.Errorf("backup: %s exists", final)
	}
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", fmt.Errorf("backup: %w", err)
	}
	work := filepath.Join(parent, "."+name+".partial")
	if err := os.Mkdir(work, 0o700); err != nil {
		return "", fmt.Errorf("backup: %w", err)
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(work)
		}
	}()
	m, err := backupInto(ctx, o, work)
	if err != nil {
		return "", fmt.Errorf("backup: %w", err)
	}
	m.Created = now
	if _, err := writeFile(work, ManifestFile, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(m)
	}); err != nil {
		return "", fmt.Errorf("backup: %w", err)
	}
	if err := syncDir(work); err != nil {
		return "", fmt.Errorf("backup: %w", err)
	}
	if err := os.Rename(work, final); err != nil {
		return "", fmt.Errorf("backup: %w", err)
	}
	done = true
	if err := syncDir(parent); err != nil {
		return "", fmt.Errorf("backup: %w", err)
	}
	return final, nil
}

// backupInto writes the parts into dir: the database first, then the
// streams, then checks they fit together.
func backupInto(ctx context.Context, o Options, dir string) (Manifest, error) {
	m := Manifest{Format: FormatVersion, Order: orderNote}
	conn, err := pgx.Connect(ctx, o.PostgresURL)
	if err != nil {
		return m, fmt.Errorf("postgres: %w", err)
	}
	defer conn.Close(context.Background())
	start := time.Now()
	if m.Postgres, err = dumpPostgres(ctx, conn, dir); err != nil {
		return m, fmt.Errorf("postgres: %w", err)
	}
	var rows int64
	for _, t := range m.Postgres.Tables {
		rows += t.Rows
	}
	o.Log.Info().Str("database", m.Postgres.Database).Int64("schema_version", m.Postgres.SchemaVersion).Int("tables", len(m.Postgres.Tables)).
		Int64("rows", rows).Dur("took", time.Since(start)).Msg("database dumped")

	js, err := jetstream.New(o.NATS)
	if err != nil {
		return m, err
	}
	for _, name := range Streams {
		s, err := js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) && !slices.Contains(required, name) {
			o.Log.Info().Str("stream", name).Msg("no such stream: nothing to keep")
			continue
		}
		if err != nil {
			return m, fmt.Errorf("stream %s: %w", name, err)
		}
		start := time.Now()
		sd := StreamDump{Name: name, Created: streamIdentity(s.CachedInfo().Created)}
		var meta streamMeta
		sd.FileSum, err = writeFile(dir, "jetstream/"+name+".snapshot", func(w io.Writer) error {
			var err error
			meta, err = snapshotStream(ctx, o.NATS, name, w)
			return err
		})
		if err != nil {
			return m, err
		}
		var st streamState
		if err := json.Unmarshal(meta.State, &st); err != nil {
			return m, fmt.Errorf("stream %s: state %s: %w", name, meta.State, err)
		}
		sd.Config, sd.State, sd.FirstSeq, sd.LastSeq, sd.Messages = meta.Config, meta.State, st.FirstSeq, st.LastSeq, st.Messages
		m.Streams = append(m.Streams, sd)
		o.Log.Info().Str("stream", name).Uint64("messages", st.Messages).Uint64("first_seq", st.FirstSeq).Uint64("last_seq", st.LastSeq).
			Int("consumers", st.Consumers).Int64("bytes", sd.Bytes).Dur("took", time.Since(start)).Msg("stream kept")
	}
	c := compare(m.Postgres.StreamOffsets, identities(m.Streams))
	for _, w := range c.unbound {
		o.Log.Warn().Msg(w)
	}
	if len(c.ahead) > 0 {
		return m, fmt.Errorf("the database is ahead of its stream (was a stream made anew while the backup ran?): %s", strings.Join(c.ahead, "; "))
	}
	return m, nil
}

// streamID is what the order checks know of a stream.
type streamID struct {
	Created string
	LastSeq uint64
}

func identities(streams []StreamDump) map[string]streamID {
	out := map[string]streamID{}
	for _, s := range streams {
		out[s.Name] = streamID{s.Created, s.LastSeq}
	}
	return out
}

// comparison is how a database's offsets relate to streams.
type comparison struct {
	// ahead: an offset beyond the end of the stream it was stored for.
	ahead []string
	// unbound: offsets stored for another stream than the one there;
	// persistence will apply that stream from its start, in a new epoch.
	unbound []string
	// bound are the streams whose offsets name them.
	bound map[string]bool
}

// compare relates offsets to streams (by name); a stream not among
// streams is not compared.
func compare(offsets []StreamOffset, streams map[string]streamID) comparison {
	c := comparison{bound: map[string]bool{}}
	for _, o := range offsets {
		s, ok := streams[o.Stream]
		if !ok {
			continue
		}
		switch {
		case o.StreamCreated != "" && o.StreamCreated != s.Created:
			c.unbound = append(c.unbound, fmt.Sprintf("the database's offset of %s (consumer %s, %d) was stored for the stream created %s, not this one (created %s): "+
				"persistence will apply this stream from its first message, in a new epoch", o.Stream, o.Consumer, o.LastSeq, o.StreamCreated, s.Created))
		case o.LastSeq > s.LastSeq:
			c.ahead = append(c.ahead, fmt.Sprintf("%s: the database has applied it up to %d (consumer %s), the stream ends at %d", o.Stream, o.LastSeq, o.Consumer, s.LastSeq))
		default:
			c.bound[o.Stream] = true
		}
	}
	return c
}

// ReadManifest reads and checks the manifest of the backup in dir.
func ReadManifest(dir string) (Manifest, error) {
	var m Manifest
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%s: %w", ManifestFile, err)
	}
	if m.Format != FormatVersion {
		return m, fmt.Errorf("%s: format %d; this alicia reads format %d", ManifestFile, m.Format, FormatVersion)
	}
	return m, nil
}

// Config is what `alicia backup` and `alicia restore` read from the
// environment, as the services and `alicia migrate` do.
type Config struct {
	// NATS is where the streams are and the admin user's credentials
	// (found as `alicia replay` finds them, pkg opnats).
	NATS opnats.Config
	// Roles, for a restore: all three role URLs or none (compose: the
	// migrate job's postgres_<role>_url files).
	Roles    *localpg.RoleURLs
	Replicas int
}

// ConfigFromEnv is ConfigFrom the process environment: the command's only
// source.
func ConfigFromEnv() (Config, error) { return ConfigFrom(config.Environ()) }

// ConfigFrom reads ALICIA_NATS_URL (default nats://127.0.0.1:4222),
// ALICIA_NATS_USER and ALICIA_NATS_PASSWORD(_FILE) (the admin user; else the
// admin URL `alicia up` wrote into ALICIA_DATA_DIR),
// ALICIA_POSTGRES_{MIGRATOR,WRITER,READER}_URL(_FILE) and
// ALICIA_STREAM_REPLICAS from src. The database's URL is localpg.Ensure's
// (ALICIA_POSTGRES_URL or its _FILE, else the local dev Postgres).
func ConfigFrom(src config.Source) (Config, error) {
	var c Config
	nc, err := opnats.From(src)
	c.NATS = nc
	var r localpg.RoleURLs
	errs := []error{
		err,
		src.Secret(migratecmd.EnvMigratorURL, &r.Migrator),
		src.Secret(migratecmd.EnvWriterURL, &r.Writer),
		src.Secret(migratecmd.EnvReaderURL, &r.Reader),
	}
	streams, err := bus.StreamsFrom(src)
	c.Replicas = streams.Replicas
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	switch {
	case r.Migrator != "" && r.Writer != "" && r.Reader != "":
		c.Roles = &r
	case r.Migrator != "" || r.Writer != "" || r.Reader != "":
		return c, fmt.Errorf("set all of %s, %s and %s (or their _FILE) or none", migratecmd.EnvMigratorURL, migratecmd.EnvWriterURL, migratecmd.EnvReaderURL)
	}
	return c, nil
}

// Connect connects to NATS as the admin user (opnats.Config.Connect).
func (c Config) Connect(name string) (*nats.Conn, error) { return c.NATS.Connect(name) }
