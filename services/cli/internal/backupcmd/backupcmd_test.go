package backupcmd_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/localpg"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
	"github.com/alicia-voice/alicia/services/cli/internal/backupcmd"
	"github.com/alicia-voice/alicia/services/persistence"
)

// site is one deployment's NATS server and database, with a persistence
// service that can be started and stopped.
type site struct {
	t    *testing.T
	ns   *server.Server
	nc   *nats.Conn
	js   jetstream.JetStream
	pub  *bus.Publisher
	pg   string // the superuser's URL
	stop func()
}

func newSite(t *testing.T, pgURL string) *site {
	t.Helper()
	ns := natstest.Run(t)
	nc := natstest.Connect(t, ns)
	js := natstest.JetStream(t, nc)
	return &site{t: t, ns: ns, nc: nc, js: js, pub: bus.NewPublisher(js), pg: pgURL}
}

// persistence runs persistence against the site, logging in to the
// database as pgURL, until stopped (or the test ends).
func (s *site) persistence(pgURL string) {
	s.t.Helper()
	cfg := persistence.DefaultConfig()
	cfg.NATSURL, cfg.PostgresURL, cfg.Migrate = s.ns.ClientURL(), pgURL, false
	svc := testkit.Go(s.t, "persistence", func(ctx context.Context) error { return persistence.Run(ctx, cfg, testkit.Log()) })
	s.stop = svc.Stop
}

// applied waits until persistence has applied stream up to seq.
func (s *site) applied(stream string, seq uint64) {
	s.t.Helper()
	testkit.EventuallyNoError(s.t, time.Minute, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return rpc.WaitApplied(ctx, s.nc, stream, seq)
	}, "persistence.applied %s %d", stream, seq)
}

var userMeta = map[string]any{"alicia.user_id": "user-1"}

// turn publishes a user message and a streamed answer in conversation cid
// and returns the last CONVERSATIONS sequence.
func (s *site) turn(cid string, n int) uint64 {
	s.t.Helper()
	ctx := context.Background()
	u, a := fmt.Sprintf("am_u%d_%s", n, cid), fmt.Sprintf("am_a%d_%s", n, cid)
	if _, err := s.pub.PublishClient(ctx, protocol.Envelope{StanzaID: int32(n), ConversationID: cid, Type: protocol.TypeUserMessage, Meta: userMeta,
		Body: &protocol.UserMessage{ID: u, ConversationID: cid, Content: fmt.Sprintf("Question %d of %s?", n, cid)}}); err != nil {
		s.t.Fatal(err)
	}
	var last uint64
	for _, body := range []protocol.Body{
		&protocol.StartAnswer{ID: a, PreviousID: u, ConversationID: cid},
		&protocol.AssistantSentence{PreviousID: a, ConversationID: cid, Sequence: 1, Text: "First, this."},
		&protocol.AssistantSentence{PreviousID: a, ConversationID: cid, Sequence: 2, Text: "Then that.", IsFinal: protocol.Ptr(true)},
	} {
		ack, err := s.pub.PublishServer(ctx, protocol.Envelope{ConversationID: cid, Type: body.MessageType(), Meta: userMeta, Body: body}, "")
		if err != nil {
			s.t.Fatal(err)
		}
		last = ack.Sequence
	}
	return last
}

// memory publishes a memory the memory service made (with its embedding)
// and returns its SYSTEM sequence.
func (s *site) memory(id string, seed float64) uint64 {
	s.t.Helper()
	emb := make([]float64, 1024)
	for i := range emb {
		emb[i] = math.Sin(seed + float64(i)*0.01)
	}
	ack, err := s.pub.PublishSystem(context.Background(), protocol.Envelope{Type: protocol.TypeMemoryAction, Meta: userMeta,
		Body: &protocol.MemoryAction{ID: "ama_" + id, Action: protocol.MemoryActionActionCreate, Timestamp: 1700000000000,
			Memory: &protocol.MemoryActionMemory{ID: &id, Content: "likes " + id, Embedding: emb, EmbeddingModel: protocol.Ptr("bge-m3")}}}, "")
	if err != nil {
		s.t.Fatal(err)
	}
	return ack.Sequence
}

// tables returns, for every table of the site's database, its row count
// and a hash of its rows (less the columns named), as text.
func tables(t *testing.T, pgURL string, less ...string) map[string]string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'goose_db_version' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	drop := ""
	for _, c := range less {
		drop += " - '" + c + "'"
	}
	out := map[string]string{}
	for _, n := range names {
		var count int64
		var sum string
		q := fmt.Sprintf(`SELECT count(*), md5(coalesce(string_agg((to_jsonb(t)%s)::text, E'\n' ORDER BY (to_jsonb(t)%s)::text), '')) FROM public.%s t`,
			drop, drop, pgx.Identifier{n}.Sanitize())
		if err := conn.QueryRow(ctx, q).Scan(&count, &sum); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		out[n] = fmt.Sprintf("%d rows %s", count, sum)
	}
	return out
}

func query[T any](t *testing.T, pgURL, q string, args ...any) T {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v T
	if err := conn.QueryRow(ctx, q, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v
}

// sameStream checks that stream holds the same messages (sequence,
// subject, headers, data, time) on both servers.
func sameStream(t *testing.T, a, b jetstream.JetStream, name string) {
	t.Helper()
	ctx := context.Background()
	sa, err := a.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.Stream(ctx, name)
	if err != nil {
		t.Fatalf("restored %s: %v", name, err)
	}
	ia, _ := sa.Info(ctx)
	ib, _ := sb.Info(ctx)
	if ia.State.Msgs != ib.State.Msgs || ia.State.FirstSeq != ib.State.FirstSeq || ia.State.LastSeq != ib.State.LastSeq {
		t.Fatalf("%s: state %+v, restored %+v", name, ia.State, ib.State)
	}
	for seq := ia.State.FirstSeq; seq <= ia.State.LastSeq && ia.State.Msgs > 0; seq++ {
		ma, errA := sa.GetMsg(ctx, seq)
		mb, errB := sb.GetMsg(ctx, seq)
		if (errA == nil) != (errB == nil) {
			t.Fatalf("%s %d: %v, restored %v", name, seq, errA, errB)
		}
		if errA != nil {
			continue
		}
		if ma.Subject != mb.Subject || !bytes.Equal(ma.Data, mb.Data) || !ma.Time.Equal(mb.Time) || !reflect.DeepEqual(ma.Header, mb.Header) {
			t.Fatalf("%s %d: %s %v %d bytes, restored %s %v %d bytes", name, seq, ma.Subject, ma.Time, len(ma.Data), mb.Subject, mb.Time, len(mb.Data))
		}
	}
}

func created(t *testing.T, js jetstream.JetStream, name string) string {
	t.Helper()
	s, err := js.Stream(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo().Created.UTC().Format(time.RFC3339Nano)
}

// roleURLs makes the roles of the database at pgURL (dropped when the test
// ends) and returns their URLs, as init-secrets writes them for compose.
func roleURLs(t *testing.T, pgURL string) *localpg.RoleURLs {
	t.Helper()
	r, err := localpg.EnsureRoles(context.Background(), pgURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := localpg.DropRoles(context.Background(), pgURL); err != nil {
			t.Errorf("drop roles: %v", err)
		}
	})
	return &r
}

// source is a site with history: batch A applied by persistence, then
// persistence stopped and batch B published, so its database is behind its
// stream (as it is whenever persistence has work in hand).
type source struct {
	*site
	lastA, lastB, systemLast uint64
	durableFloor             uint64
}

func newSource(t *testing.T) *source {
	t.Helper()
	s := &source{site: newSite(t, pgtest.NewURL(t))}
	ctx := context.Background()
	if err := bus.EnsureStreams(ctx, s.js, bus.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	s.persistence(s.pg)
	for i := 1; i <= 3; i++ {
		s.turn("ac_one", i)
		s.lastA = s.turn("ac_two", i)
	}
	s.systemLast = s.memory("amem_tea", 1)
	s.memory("amem_rain", 2)
	s.systemLast = s.memory("amem_sea", 3)
	// A dead letter, kept with the rest, and a web client session, which is
	// not (TestBackupRestore signs it out after the backup).
	if _, err := s.js.Publish(ctx, "alicia.dlq.persistence", []byte("not an envelope")); err != nil {
		t.Fatal(err)
	}
	kv, err := s.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "SESSIONS", Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "0123abcd", []byte(`{"user":"user-1"}`)); err != nil {
		t.Fatal(err)
	}
	// A service's durable consumer, part way through the stream.
	cons, err := s.js.CreateOrUpdateConsumer(ctx, bus.StreamConversations, jetstream.ConsumerConfig{Durable: "memory-extraction",
		FilterSubject: "alicia.conv.*.server.>", AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(4, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
		md, _ := m.Metadata()
		s.durableFloor = md.Sequence.Stream
	}
	s.applied(bus.StreamConversations, s.lastA)
	s.applied(bus.StreamSystem, s.systemLast)
	s.stop()
	s.turn("ac_one", 4)
	s.lastB = s.turn("ac_three", 1)
	return s
}

// TestBackupRestore: a backup of a database behind its stream, restored
// into an empty NATS server and an empty database with compose's roles,
// gives the same streams (messages, sequences, times, the durable
// consumer's position), the same rows (owned by the migrator, writable by
// the writer only), the offsets bound to the restored streams; persistence
// then resumes after its offset, with no reset, and ends with the rows the
// source ends with once it has applied the same stream.
func TestBackupRestore(t *testing.T) {
	src := newSource(t)
	ctx := context.Background()
	before := tables(t, src.pg)

	path, err := backupcmd.Backup(ctx, backupcmd.Options{NATS: src.nc, PostgresURL: src.pg, Log: testkit.Log()}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(path), "alicia-backup-") {
		t.Fatalf("backup at %s", path)
	}
	m, err := backupcmd.ReadManifest(path)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range m.Streams {
		names = append(names, s.Name)
	}
	if want := []string{"CONVERSATIONS", "SYSTEM", "DEADLETTER"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("streams kept %v, want %v", names, want)
	}
	var convOffset uint64
	for _, o := range m.Postgres.StreamOffsets {
		if o.Stream == bus.StreamConversations {
			convOffset = o.LastSeq
			if o.StreamCreated != created(t, src.js, bus.StreamConversations) {
				t.Errorf("offset of %s stored for %s, the stream was created %s", o.Stream, o.StreamCreated, created(t, src.js, bus.StreamConversations))
			}
		}
	}
	if convOffset != src.lastA || m.Streams[0].LastSeq != src.lastB {
		t.Fatalf("manifest: database applied CONVERSATIONS to %d, stream ends at %d; want %d and %d", convOffset, m.Streams[0].LastSeq, src.lastA, src.lastB)
	}
	if m.Postgres.SchemaVersion == 0 || len(m.Postgres.Tables) == 0 {
		t.Fatalf("manifest: schema version %d, %d tables", m.Postgres.SchemaVersion, len(m.Postgres.Tables))
	}

	// The session is signed out after the backup: no restore brings it back.
	srcSessions, err := src.js.KeyValue(ctx, "SESSIONS")
	if err != nil {
		t.Fatal(err)
	}
	if err := srcSessions.Purge(ctx, "0123abcd"); err != nil {
		t.Fatal(err)
	}

	dst := newSite(t, pgtest.NewEmptyURL(t))
	roles := roleURLs(t, dst.pg)
	err = backupcmd.Restore(ctx, backupcmd.RestoreOptions{NATS: dst.nc, PostgresURL: dst.pg, Roles: roles, Replicas: 1, Log: testkit.Log()}, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dst.js.Stream(ctx, backupcmd.SessionsStream); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("sessions on the restored server (%v): a session signed out after the backup would be valid again", err)
	}
	for _, name := range names {
		sameStream(t, src.js, dst.js, name)
	}
	for _, name := range backupcmd.Derived {
		if _, err := dst.js.Stream(ctx, name); !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("%s on the restored server: %v; the services make it", name, err)
		}
	}
	ci, err := dst.js.Consumer(ctx, bus.StreamConversations, "memory-extraction")
	if err != nil {
		t.Fatalf("the durable consumer was not restored: %v", err)
	}
	if floor := ci.CachedInfo().AckFloor.Stream; floor != src.durableFloor {
		t.Errorf("restored consumer's ack floor %d, want %d", floor, src.durableFloor)
	}
	// The offsets name the restored streams (below); everything else is as it was.
	if got, want := tables(t, dst.pg, "stream_created"), tables(t, src.pg, "stream_created"); !reflect.DeepEqual(got, want) || len(got) != len(before) {
		t.Errorf("restored tables differ from the source's:\n got %v\nwant %v", got, want)
	}
	want := created(t, dst.js, bus.StreamConversations)
	if got := query[string](t, dst.pg, `SELECT string_agg(DISTINCT stream_created, ',') FROM alicia_stream_offsets WHERE stream = 'CONVERSATIONS'`); got != want {
		t.Errorf("offsets of CONVERSATIONS name the stream created %s, the restored one was created %s", got, want)
	}
	if owners := query[string](t, dst.pg, `SELECT string_agg(DISTINCT tableowner, ',') FROM pg_tables WHERE schemaname = 'public'`); owners != localpg.RolesFor(dbName(t, dst.pg)).Migrator {
		t.Errorf("restored tables owned by %s, want the migrator", owners)
	}
	if _, err := execAs(roles.Reader, `INSERT INTO alicia_stream_offsets (stream, consumer) VALUES ('X', 'x')`); err == nil {
		t.Error("the reader role could write a restored table")
	}
	if _, err := execAs(roles.Writer, `DELETE FROM alicia_stream_offsets WHERE stream = 'X'`); err != nil {
		t.Errorf("the writer role cannot write a restored table: %v", err)
	}

	// Persistence resumes after its offset, in the same epoch.
	dst.persistence(roles.Writer)
	dst.applied(bus.StreamConversations, src.lastB)
	if got := query[int64](t, dst.pg, `SELECT count(*) FROM alicia_conversations WHERE id = 'ac_three'`); got != 1 {
		t.Fatalf("the envelopes after the database's offset were not applied (ac_three: %d rows)", got)
	}
	if epochs := query[string](t, dst.pg, `SELECT string_agg(DISTINCT epoch::text, ',') FROM alicia_stream_offsets`); epochs != "0" {
		t.Errorf("epochs %s after the restore: persistence took the restored stream for another one", epochs)
	}
	src.persistence(src.pg)
	src.applied(bus.StreamConversations, src.lastB)
	src.stop()
	dst.stop()
	// Operational rows differ (when, which instance); the record must not.
	less := []string{"created_at", "updated_at", "owner", "lease_expires_at", "fence", "stream_created", "seen_at", "started_at", "id"}
	a, b := tables(t, src.pg, less...), tables(t, dst.pg, less...)
	delete(a, "alicia_persistence_instances")
	delete(b, "alicia_persistence_instances")
	if !reflect.DeepEqual(a, b) {
		t.Errorf("after applying the same stream, the tables differ:\nsource   %v\nrestored %v", a, b)
	}
}

// TestRestoreRefuses: a restore changes nothing when a check fails: a
// damaged file, a service still connected or still reading, a database or
// streams already there (without --replace), streams that would go under a
// database ahead of them. --replace restores over what is there; the
// database alone goes under newer streams and persistence catches up; the
// two parts restored one after the other are bound like a whole restore.
func TestRestoreRefuses(t *testing.T) {
	src := newSource(t)
	ctx := context.Background()
	early, err := backupcmd.Backup(ctx, backupcmd.Options{NATS: src.nc, PostgresURL: src.pg, Log: testkit.Log()}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dst := newSite(t, pgtest.NewEmptyURL(t))
	roles := roleURLs(t, dst.pg)
	opts := backupcmd.RestoreOptions{NATS: dst.nc, PostgresURL: dst.pg, Roles: roles, Replicas: 1, Log: testkit.Log()}
	untouched := func(t *testing.T) {
		t.Helper()
		if n := query[int64](t, dst.pg, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`); n != 0 {
			t.Fatalf("the database has %d tables after a refused restore", n)
		}
		for name := range dst.js.StreamNames(ctx).Name() {
			t.Fatalf("stream %s after a refused restore", name)
		}
	}

	t.Run("a damaged file", func(t *testing.T) {
		bad := copyDir(t, early)
		f := filepath.Join(bad, "jetstream", "SYSTEM.snapshot")
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0xff
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
		err = backupcmd.Restore(ctx, opts, bad)
		if err == nil || !strings.Contains(err.Error(), "damaged") {
			t.Fatalf("err = %v, want the damaged file named", err)
		}
		untouched(t)
	})
	t.Run("a service still connected to the database", func(t *testing.T) {
		conn, err := pgx.Connect(ctx, roles.Writer)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		err = backupcmd.Restore(ctx, opts, early)
		if err == nil || !strings.Contains(err.Error(), "still connected") {
			t.Fatalf("err = %v, want the connected service named", err)
		}
		untouched(t)
	})
	if err := backupcmd.Restore(ctx, opts, early); err != nil {
		t.Fatal(err)
	}
	restored := tables(t, dst.pg, "stream_created")
	t.Run("a database and streams with data already there", func(t *testing.T) {
		if err := backupcmd.Restore(ctx, opts, early); err == nil || !strings.Contains(err.Error(), "--replace") {
			t.Fatalf("err = %v, want --replace suggested", err)
		}
		o := opts
		o.Only = backupcmd.PartJetStream
		if err := backupcmd.Restore(ctx, o, early); err == nil || !strings.Contains(err.Error(), "--replace") {
			t.Fatalf("err = %v, want --replace suggested for the streams", err)
		}
		if got := tables(t, dst.pg, "stream_created"); !reflect.DeepEqual(got, restored) {
			t.Fatal("a refused restore changed the database")
		}
	})
	t.Run("a service still reading a stream", func(t *testing.T) {
		cons, err := dst.js.CreateOrUpdateConsumer(ctx, bus.StreamSystem, jetstream.ConsumerConfig{Durable: "persistence", AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			t.Fatal(err)
		}
		it, err := cons.Consume(func(jetstream.Msg) {}, jetstream.PullExpiry(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 10*time.Second, func() bool {
			ci, err := cons.Info(ctx)
			return err == nil && ci.NumWaiting > 0
		}, "the consumer's pull request")
		o := opts
		o.Replace = true
		err = backupcmd.Restore(ctx, o, early)
		it.Stop()
		if err == nil || !strings.Contains(err.Error(), "still reads") {
			t.Fatalf("err = %v, want the reading service named", err)
		}
	})
	t.Run("--replace", func(t *testing.T) {
		if _, err := execAs(dst.pg, `DELETE FROM alicia_messages`); err != nil {
			t.Fatal(err)
		}
		o := opts
		o.Replace = true
		// The stopped consumer's last pull request expires on the server.
		testkit.EventuallyNoError(t, 30*time.Second, func() error { return backupcmd.Restore(ctx, o, early) }, "restore --replace")
		sameStream(t, src.js, dst.js, bus.StreamSystem)
		if got := tables(t, dst.pg, "stream_created"); !reflect.DeepEqual(got, restored) {
			t.Errorf("after --replace the tables differ from the backup's:\n got %v\nwant %v", got, restored)
		}
		want := created(t, dst.js, bus.StreamConversations)
		if got := query[string](t, dst.pg, `SELECT string_agg(DISTINCT stream_created, ',') FROM alicia_stream_offsets WHERE stream = 'CONVERSATIONS'`); got != want {
			t.Errorf("offsets name the stream created %s, the restored one was created %s", got, want)
		}
	})

	t.Run("a new volume: a schema and streams without data", func(t *testing.T) {
		// What the migrate job and the services' first start leave: no
		// --replace needed, nothing is lost.
		fresh := newSite(t, pgtest.NewURL(t))
		if err := bus.EnsureStreams(ctx, fresh.js, bus.StreamsConfig{}); err != nil {
			t.Fatal(err)
		}
		o := opts
		o.NATS, o.PostgresURL, o.Roles = fresh.nc, fresh.pg, roleURLs(t, fresh.pg)
		if err := backupcmd.Restore(ctx, o, early); err != nil {
			t.Fatal(err)
		}
		if got := tables(t, fresh.pg, "stream_created"); !reflect.DeepEqual(got, restored) {
			t.Errorf("restored over an empty schema, the tables differ from the backup's:\n got %v\nwant %v", got, restored)
		}
		sameStream(t, src.js, fresh.js, bus.StreamConversations)
		if _, err := fresh.js.Stream(ctx, bus.StreamASRJobs); !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("the empty ASR_JOBS stayed: %v", err)
		}
	})

	// The source goes on: its database is now ahead of the early backup.
	lastC := src.turn("ac_four", 1)
	src.persistence(src.pg)
	src.applied(bus.StreamConversations, lastC)
	src.stop()
	t.Run("the streams alone under a database ahead of them", func(t *testing.T) {
		late := newSite(t, "")
		o := opts
		o.NATS, o.PostgresURL, o.Roles, o.Only = late.nc, src.pg, nil, backupcmd.PartJetStream
		err := backupcmd.Restore(ctx, o, early)
		if err == nil || !strings.Contains(err.Error(), "ahead") {
			t.Fatalf("err = %v, want the database ahead of the streams refused", err)
		}
		for name := range late.js.StreamNames(ctx).Name() {
			t.Fatalf("stream %s after a refused restore", name)
		}
	})
	t.Run("the database alone under newer streams", func(t *testing.T) {
		// The early database (applied up to batch A) under the source's
		// own streams, which hold batches B and C: persistence catches up.
		o := opts
		o.NATS, o.Only, o.Replace = src.nc, backupcmd.PartPostgres, true
		if err := backupcmd.Restore(ctx, o, early); err != nil {
			t.Fatal(err)
		}
		if got := query[int64](t, dst.pg, `SELECT count(*) FROM alicia_conversations WHERE id IN ('ac_three', 'ac_four')`); got != 0 {
			t.Fatalf("%d rows of batches B and C in the early database", got)
		}
		src.persistence(roles.Writer)
		src.applied(bus.StreamConversations, lastC)
		src.stop()
		if got := query[int64](t, dst.pg, `SELECT count(*) FROM alicia_conversations WHERE id IN ('ac_three', 'ac_four')`); got != 2 {
			t.Fatalf("persistence did not catch up from the restored offset (%d of 2 conversations)", got)
		}
		if epochs := query[string](t, dst.pg, `SELECT string_agg(DISTINCT epoch::text, ',') FROM alicia_stream_offsets`); epochs != "0" {
			t.Errorf("epochs %s: persistence took the source's stream for another one", epochs)
		}
	})
	t.Run("the database, then the streams", func(t *testing.T) {
		two := newSite(t, pgtest.NewEmptyURL(t))
		o := opts
		o.NATS, o.PostgresURL, o.Roles = two.nc, two.pg, roleURLs(t, two.pg)
		o.Only = backupcmd.PartPostgres
		if err := backupcmd.Restore(ctx, o, early); err != nil {
			t.Fatal(err)
		}
		o.Only = backupcmd.PartJetStream
		if err := backupcmd.Restore(ctx, o, early); err != nil {
			t.Fatal(err)
		}
		want := created(t, two.js, bus.StreamConversations)
		if got := query[string](t, two.pg, `SELECT string_agg(DISTINCT stream_created, ',') FROM alicia_stream_offsets WHERE stream = 'CONVERSATIONS'`); got != want {
			t.Errorf("offsets name the stream created %s, the restored one was created %s", got, want)
		}
		sameStream(t, src.js, two.js, bus.StreamSystem)
	})
}

func dbName(t *testing.T, pgURL string) string {
	u, err := url.Parse(pgURL)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(u.Path, "/")
}

func execAs(pgURL, sql string) (int64, error) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	tag, err := conn.Exec(ctx, sql)
	return tag.RowsAffected(), err
}

func copyDir(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(dir))
	if err := os.CopyFS(out, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	return out
}
