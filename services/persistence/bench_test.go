package persistence_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/services/persistence"
)

// mixConversation is a realistic conversation of 50 envelopes: a
// Configuration, three turns of (UserMessage, StartAnswer, 12 sentences,
// tool request, tool result) and a SessionStats, every envelope with
// trace meta (a trace_id column of the row it makes, no alicia_meta row).
func mixConversation(cid string) []protocol.Envelope {
	meta := map[string]any{"messaging.trace_id": traceID, "messaging.span_id": spanID}
	envs := []protocol.Envelope{{StanzaID: 1, ConversationID: cid, Type: protocol.TypeConfiguration, Meta: meta,
		Body: &protocol.Configuration{PreferredLanguage: ptr("en")}}}
	for turn := range 3 {
		user, answer := fmt.Sprintf("am_u%d_%s", turn, cid), fmt.Sprintf("am_a%d_%s", turn, cid)
		envs = append(envs,
			protocol.Envelope{StanzaID: int32(turn + 2), ConversationID: cid, Type: protocol.TypeUserMessage, Meta: meta,
				Body: &protocol.UserMessage{ID: user, ConversationID: cid, Content: "What should I cook tonight with what is in my fridge?"}},
			protocol.Envelope{ConversationID: cid, Type: protocol.TypeStartAnswer, Meta: meta,
				Body: &protocol.StartAnswer{ID: answer, PreviousID: user, ConversationID: cid}})
		for i := int32(1); i <= 12; i++ {
			envs = append(envs, protocol.Envelope{ConversationID: cid, Type: protocol.TypeAssistantSentence, Meta: meta,
				Body: &protocol.AssistantSentence{PreviousID: answer, ConversationID: cid, Sequence: i,
					Text: "A frittata is quick, uses leftovers and takes about twenty minutes.", IsFinal: ptr(i == 12)}})
		}
		envs = append(envs,
			protocol.Envelope{ConversationID: cid, Type: protocol.TypeToolUseRequest, Meta: meta,
				Body: &protocol.ToolUseRequest{ID: "atu" + answer, MessageID: answer, ConversationID: cid, ToolName: "memory_query",
					Parameters: map[string]any{"query": "fridge contents"}, Execution: "server"}},
			protocol.Envelope{ConversationID: cid, Type: protocol.TypeToolUseResult, Meta: meta,
				Body: &protocol.ToolUseResult{ID: "atr" + answer, RequestID: "atu" + answer, ConversationID: cid, Success: true,
					Result: map[string]any{"items": []any{"eggs", "spinach", "feta"}}}})
	}
	return append(envs, protocol.Envelope{ConversationID: cid, Type: protocol.TypeSessionStats, Meta: meta,
		Body: &protocol.SessionStats{MessageCount: 6, ToolCallCount: 3, SessionDurationMs: 90000}})
}

func publishMix(b *testing.B, js jetstream.JetStream, convs, active int) uint64 {
	b.Helper()
	var last uint64
	ctx := context.Background()
	for w := 0; w < convs; w += active {
		var batch [][]protocol.Envelope
		for c := w; c < min(w+active, convs); c++ {
			batch = append(batch, mixConversation(fmt.Sprintf("ac_bench%06d", c)))
		}
		for k := range batch[0] {
			for _, envs := range batch {
				env := envs[k]
				data, err := protocol.Encode(env)
				if err != nil {
					b.Fatal(err)
				}
				subject := subjects.Server(env.ConversationID, env.Type)
				if env.StanzaID > 0 {
					subject = subjects.Client(env.ConversationID, env.Type)
				}
				if _, err := js.PublishAsync(subject, data); err != nil {
					b.Fatal(err)
				}
			}
			<-js.PublishAsyncComplete()
		}
	}
	info, err := js.Stream(ctx, bus.StreamConversations)
	if err != nil {
		b.Fatal(err)
	}
	last = info.CachedInfo().State.LastSeq
	return last
}

// BenchmarkApplyThroughput applies a pre-published stream of realistic
// envelopes and reports envelopes/s, next to raw pgx CopyFrom rows/s into a
// table shaped like alicia_sentences, measured in the same run.
func BenchmarkApplyThroughput(b *testing.B) {
	for _, shards := range []int{1, 2} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) { applyThroughput(b, shards) })
	}
}

func applyThroughput(b *testing.B, shards int) {
	const convs = 2000 // 100,000 envelopes
	s := newStack(b)
	s.cfg.Shards = shards
	last := publishMix(b, s.js, convs, 100)
	s.historyTimeout = 10 * time.Minute
	b.ResetTimer()
	start := time.Now()
	s.start()
	s.applied(bus.StreamConversations, last)
	elapsed := time.Since(start)
	b.StopTimer()
	rate := float64(last) / elapsed.Seconds()
	b.ReportMetric(rate, "envelopes/s")
	if n := s.queryInt(`SELECT count(*) FROM alicia_sentences`); n != convs*36 {
		b.Fatalf("%d sentences applied, want %d", n, convs*36)
	}
	b.ReportMetric(float64(s.queryInt(countRows))/float64(last), "rows/envelope")

	copyRate := copyFromRate(b, s)
	b.ReportMetric(copyRate, "copyfrom-rows/s")
	// The goal for the realistic mix is at least 0.25 envelopes per raw row.
	b.ReportMetric(rate/copyRate, "envelopes-per-copyfrom-row")
	// The floor: the same rows bulk-loaded into the schema's own tables,
	// with their foreign keys, checks and indexes, in envelopes/s.
	floor := schemaCopyRate(b, s, convs)
	b.ReportMetric(floor, "schema-copy-envelopes/s")
	b.ReportMetric(floor/copyRate, "schema-copy-envelopes-per-copyfrom-row")
}

// schemaCopyRate bulk-loads the rows the realistic mix of convs
// conversations makes (conversations, chained messages, sentences, tool
// uses, session stats) into the schema's tables with pgx CopyFrom, in one
// transaction and in foreign-key order, and returns the rate in envelopes
// of the mix per second: the fastest PostgreSQL takes these rows with the
// schema's constraints, with none of the apply's work (reading the stream,
// decoding, deduplication, offsets, contents, heads).
func schemaCopyRate(b *testing.B, s *stack, convs int) float64 {
	ctx := context.Background()
	now := time.Now().UTC()
	var conv, msgs, sents, tools, stats [][]any
	for c := range convs {
		cid := fmt.Sprintf("ac_floor%06d", c)
		conv = append(conv, []any{cid, now, now})
		var prev any
		for turn := range 3 {
			user, answer := fmt.Sprintf("am_u%d_%s", turn, cid), fmt.Sprintf("am_a%d_%s", turn, cid)
			msgs = append(msgs,
				[]any{user, cid, prev, int32(2*turn + 1), "user", "What should I cook tonight with what is in my fridge?", "completed", traceID, now, now},
				[]any{answer, cid, user, int32(2*turn + 2), "assistant", "", "streaming", traceID, now, now})
			prev = answer
			for i := int32(1); i <= 12; i++ {
				sents = append(sents, []any{fmt.Sprintf("ams_%s_%d", answer, i), answer, i,
					"A frittata is quick, uses leftovers and takes about twenty minutes.", "completed", traceID, now, now})
			}
			tools = append(tools, []any{"atu" + answer, cid, answer, "memory_query", []byte(`{"query":"fridge contents"}`),
				[]byte(`{"items":["eggs","spinach","feta"]}`), "success", "server", traceID, now, now})
		}
		stats = append(stats, []any{cid, int32(6), int32(3), int64(90000)})
	}
	t0 := time.Now()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, t := range []struct {
		table string
		cols  []string
		rows  [][]any
	}{
		{"alicia_conversations", []string{"id", "created_at", "updated_at"}, conv},
		{"alicia_messages", []string{"id", "conversation_id", "previous_id", "sequence_number", "message_role", "contents",
			"completion_status", "trace_id", "created_at", "updated_at"}, msgs},
		{"alicia_sentences", []string{"id", "message_id", "sentence_sequence_number", "text", "completion_status", "trace_id",
			"created_at", "updated_at"}, sents},
		{"alicia_tool_uses", []string{"id", "conversation_id", "message_id", "tool_name", "tool_arguments", "tool_result",
			"status", "execution", "trace_id", "created_at", "updated_at"}, tools},
		{"alicia_session_stats", []string{"conversation_id", "message_count", "tool_call_count", "session_duration_ms"}, stats},
	} {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{t.table}, t.cols, pgx.CopyFromRows(t.rows)); err != nil {
			b.Fatalf("copy into %s: %v", t.table, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		b.Fatal(err)
	}
	return float64(convs*len(mixConversation("ac_x"))) / time.Since(t0).Seconds()
}

// copyFromRate is raw pgx CopyFrom rows/s of 100,000 rows into a table
// shaped like alicia_sentences, on the stack's database.
func copyFromRate(b *testing.B, s *stack) float64 {
	ctx := context.Background()
	if _, err := s.pool.Exec(ctx, `CREATE TABLE copy_bench (LIKE alicia_sentences INCLUDING DEFAULTS INCLUDING INDEXES)`); err != nil {
		b.Fatal(err)
	}
	rows := make([][]any, 100000)
	for i := range rows {
		rows[i] = []any{fmt.Sprintf("ams_copy%07d", i), "am_x", int32(i + 1), "A frittata is quick, uses leftovers and takes about twenty minutes."}
	}
	t0 := time.Now()
	n, err := s.pool.CopyFrom(ctx, pgx.Identifier{"copy_bench"}, []string{"id", "message_id", "sentence_sequence_number", "text"}, pgx.CopyFromRows(rows))
	if err != nil {
		b.Fatal(err)
	}
	return float64(n) / time.Since(t0).Seconds()
}

// countRows counts the rows of every alicia_* table the envelopes wrote to
// (all but the stream offsets, one row per consumer).
const countRows = `SELECT COALESCE(sum((xpath('/row/c/text()',
		query_to_xml(format('SELECT count(*) AS c FROM %I', table_name), false, true, '')))[1]::text::bigint), 0)::bigint
	FROM information_schema.tables
	WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'
		AND table_name LIKE 'alicia\_%' AND table_name <> 'alicia_stream_offsets'`

// BenchmarkApplyLag publishes the realistic mix at a steady 5,000
// envelopes/s for 10 s and reports the apply lag percentiles: envelope
// stored in JetStream (its publish acknowledged) → committed in Postgres.
// It also reports the rate JetStream (fsync on every write) stored them at
// and, for context, the publish → commit latency.
func BenchmarkApplyLag(b *testing.B) {
	const rate, seconds = 5000, 10
	s := newStack(b)
	s.historyTimeout = 10 * time.Minute
	type applied struct {
		upTo uint64
		at   time.Time
	}
	var mu sync.Mutex
	var commits []applied
	s.cfg.OnApplied = func(stream string, upTo uint64) {
		if stream == bus.StreamConversations {
			mu.Lock()
			commits = append(commits, applied{upTo, time.Now()})
			mu.Unlock()
		}
	}
	s.start()
	var envs []protocol.Envelope
	for c := 0; len(envs) < rate*seconds; c++ {
		envs = append(envs, mixConversation(fmt.Sprintf("ac_lag%06d", c))...)
	}
	envs = envs[:rate*seconds]
	js, err := jetstream.New(s.nc, jetstream.WithPublishAsyncMaxPending(1<<16))
	if err != nil {
		b.Fatal(err)
	}
	sentAt := make([]time.Time, len(envs))
	ackedAt := make([]time.Time, len(envs))
	seqs := make([]uint64, len(envs))
	type pending struct {
		i int
		f jetstream.PubAckFuture
	}
	acks := make(chan pending, len(envs))
	ackErr := make(chan error, 1)
	go func() {
		defer close(ackErr)
		for p := range acks {
			select {
			case ack := <-p.f.Ok():
				seqs[p.i], ackedAt[p.i] = ack.Sequence, time.Now()
			case err := <-p.f.Err():
				ackErr <- err
				return
			}
		}
	}()
	b.ResetTimer()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	for sent := 0; sent < len(envs); {
		<-tick.C
		due := min(int(time.Since(start).Seconds()*rate), len(envs))
		for ; sent < due; sent++ {
			env := envs[sent]
			data, _ := protocol.Encode(env)
			subject := subjects.Server(env.ConversationID, env.Type)
			if env.StanzaID > 0 {
				subject = subjects.Client(env.ConversationID, env.Type)
			}
			sentAt[sent] = time.Now()
			f, err := js.PublishAsync(subject, data)
			if err != nil {
				b.Fatal(err)
			}
			acks <- pending{sent, f}
		}
	}
	close(acks)
	if err := <-ackErr; err != nil {
		b.Fatal(err)
	}
	publishedIn := time.Since(start)
	var last uint64
	for _, seq := range seqs {
		last = max(last, seq)
	}
	s.history("ac_lag000000", last)
	b.StopTimer()
	mu.Lock()
	defer mu.Unlock()
	lags := make([]time.Duration, 0, len(envs))
	e2e := make([]time.Duration, 0, len(envs))
	for i, seq := range seqs {
		j := sort.Search(len(commits), func(j int) bool { return commits[j].upTo >= seq })
		if j == len(commits) {
			b.Fatalf("envelope seq %d never reported applied", seq)
		}
		// The ack is read after the commit callback may already have fired.
		lags = append(lags, max(0, commits[j].at.Sub(ackedAt[i])))
		e2e = append(e2e, commits[j].at.Sub(sentAt[i]))
	}
	pct := func(d []time.Duration, p int) float64 {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return float64(d[len(d)*p/100].Microseconds()) / 1000
	}
	b.ReportMetric(float64(len(envs))/publishedIn.Seconds(), "stored-envelopes/s")
	b.ReportMetric(pct(lags, 50), "lag-p50-ms")
	b.ReportMetric(pct(lags, 99), "lag-p99-ms")
	b.ReportMetric(pct(e2e, 50), "publish-to-commit-p50-ms")
	b.ReportMetric(pct(e2e, 99), "publish-to-commit-p99-ms")
}

// BenchmarkReplicasThroughput applies the pre-published realistic mix
// (100,000 envelopes) with 1, 2 and 3 persistence instances sharing six
// conversation partitions, and reports envelopes/s next to raw CopyFrom
// rows/s of the same run. The instances run in this process and share the
// machine and the one Postgres server with each other.
func BenchmarkReplicasThroughput(b *testing.B) {
	for _, n := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("instances=%d", n), func(b *testing.B) { replicasThroughput(b, n) })
	}
}

func replicasThroughput(b *testing.B, instances int) {
	const convs, partitions = 2000, 6
	s := newStack(b)
	last := publishMix(b, s.js, convs, 100)
	ctx := context.Background()
	ids := make([]string, instances)
	for i := range ids {
		ids[i] = fmt.Sprintf("bench%d", i+1)
	}
	// Every instance is seen alive before any ticks, so each takes its
	// share at once instead of the first taking everything and handing
	// partitions over a tick later.
	if _, err := s.pool.Exec(ctx, `INSERT INTO alicia_persistence_instances (id, consumer, partitions) SELECT unnest($1::text[]), $2, $3`, ids, s.cfg.Consumer, partitions); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	runCtx, stop := context.WithCancel(ctx)
	errs := make(chan error, instances)
	for _, id := range ids {
		cfg := s.cfg
		cfg.Instance, cfg.Shards, cfg.LeaseTTL = id, partitions, 2*time.Second
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := persistence.Run(runCtx, cfg, zerolog.Nop()); err != nil && !errors.Is(err, context.Canceled) {
				errs <- err
			}
		}()
	}
	defer func() { stop(); wg.Wait() }()
	for s.queryInt(`SELECT count(*) FROM alicia_stream_offsets WHERE stream = $1`, bus.StreamConversations) < partitions ||
		s.queryInt(`SELECT COALESCE(min(last_seq), 0) FROM alicia_stream_offsets WHERE stream = $1`, bus.StreamConversations) < int(last) {
		select {
		case err := <-errs:
			b.Fatal(err)
		case <-time.After(10 * time.Millisecond): // polling the offsets, not waiting for a condition
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if n := s.queryInt(`SELECT count(*) FROM alicia_sentences`); n != convs*36 {
		b.Fatalf("%d sentences applied, want %d", n, convs*36)
	}
	owners := s.queryInt(`SELECT count(DISTINCT owner) FROM alicia_stream_offsets WHERE owner IS NOT NULL`)
	if owners != instances {
		b.Fatalf("%d instances held partitions, want %d", owners, instances)
	}
	rate := float64(last) / elapsed.Seconds()
	b.ReportMetric(rate, "envelopes/s")
	copyRate := copyFromRate(b, s)
	b.ReportMetric(copyRate, "copyfrom-rows/s")
	b.ReportMetric(rate/copyRate, "envelopes-per-copyfrom-row")
}
