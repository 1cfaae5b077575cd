package text_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/telemetry"
	"github.com/alicia-voice/alicia/services/gateway"
)

// pathSyncedWrites is how many synced JetStream writes lie between a
// UserMessage sent on the WebSocket and the first AssistantSentence of its
// answer reaching the client, read from the code:
//
//  1. the gateway's edge publishes the UserMessage on CONVERSATIONS
//     (pkg/edge HandleClient → bus.PublishClient); the server stores and
//     fsyncs it before anything else sees it;
//  2. LLM_TURNS sources it into the conversation's partition
//     (services/llm/internal/queue): a second stored, fsynced message, and
//     the llm's partition consumer gets the turn only from there;
//  3. the llm's outbox publishes StartAnswer on CONVERSATIONS
//     (services/llm/internal/turn answer); the outbox publishes in order,
//     so the sentence waits for this PubAck (the write itself runs while the
//     llm searches the memories and asks the model);
//  4. the first AssistantSentence on CONVERSATIONS, stored and fsynced
//     before the gateway's ordered consumer can forward it.
//
// Nothing else is written first: the benchmark's memory search finds no
// memories (no MemoryTrace), the fake model calls no tool and reasons not,
// history.get and memory.search are requests, not stream writes, and the
// llm's consumers, persistence's and the gateway's keep their state in
// memory. The llm's ack of a turn deletes it from the LLM_TURNS work queue
// (a synced tombstone) only after the answer's last sentence is published:
// off the path. The benchmarks count the path's writes again at run time
// (pathWrites) and say when the two disagree.
const pathSyncedWrites = 4

// turnRecord is what the client saw of one turn.
type turnRecord struct {
	sent, firstAt      time.Time
	userID, startID    string
	startSeq, firstSeq uint64 // CONVERSATIONS sequences (from the stanza ids)
	traceID            string // the first sentence's trace id (when the process traces)
}

func (r turnRecord) first() time.Duration { return r.firstAt.Sub(r.sent) }

// measuredTurn sends text as a UserMessage and reads the whole answer,
// noting StartAnswer's sequence and when the first AssistantSentence
// arrived. An ErrorMessage, a broken connection or no answer within 30 s is
// an error.
func (c *client) measuredTurn(text string) (turnRecord, error) {
	r := turnRecord{userID: protocol.NewID("am")}
	b, err := protocol.Encode(protocol.Envelope{StanzaID: c.next, ConversationID: c.cid, Type: protocol.TypeUserMessage,
		Body: &protocol.UserMessage{ID: r.userID, ConversationID: c.cid, Content: text, Timestamp: protocol.Ptr(time.Now().UnixMilli())}})
	if err != nil {
		return r, err
	}
	c.next++
	r.sent = time.Now()
	if err := c.c.Write(context.Background(), websocket.MessageBinary, b); err != nil {
		return r, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		env, err := c.recv(time.Until(deadline))
		if err != nil {
			return r, err
		}
		switch b := env.Body.(type) {
		case *protocol.StartAnswer:
			if b.PreviousID == r.userID {
				r.startID, r.startSeq = b.ID, bus.SequenceOfStanza(env.StanzaID)
			}
		case *protocol.AssistantSentence:
			if r.startID == "" || b.PreviousID != r.startID {
				continue
			}
			if r.firstAt.IsZero() {
				r.firstAt, r.firstSeq = time.Now(), bus.SequenceOfStanza(env.StanzaID)
				r.traceID, _ = env.Meta[telemetry.MetaTraceID].(string)
			}
			if b.IsFinal != nil && *b.IsFinal {
				return r, nil
			}
		case *protocol.ErrorMessage:
			return r, fmt.Errorf("ErrorMessage %d: %s", b.Code, b.Message)
		}
	}
}

// turnLatency sends one UserMessage and returns the time until the first
// AssistantSentence of its answer arrives on the WebSocket; it then reads
// the rest of the answer. Any error fails the benchmark.
func (c *client) turnLatency() time.Duration {
	c.t.Helper()
	r, err := c.measuredTurn("Hello there, how are you?")
	if err != nil {
		c.t.Fatal(err)
	}
	return r.first()
}

// manyConnections lets one user hold n WebSockets, each sending up to an
// envelope a second on average (the benchmarks' clients are all alice).
func manyConnections(n int) func(*gateway.Config) {
	return func(c *gateway.Config) {
		c.Quotas.ConnectionsPerUser = n
		c.Quotas.Edge.UserRate, c.Quotas.Edge.UserBurst = float64(n), float64(2*n)
		c.Quotas.Budgets.ConversationsPerHour = max(c.Quotas.Budgets.ConversationsPerHour, 2*n)
	}
}

// budgetsOff turns every budget in bytes and work off (edge.Budgets): the
// gateway then keeps no accounts, the cost of the checks is gone.
func budgetsOff(c *gateway.Config) {
	c.Quotas.Budgets = edge.Budgets{AudioBytesPerSecond: -1, AudioBytesPerDay: -1, StoredBytes: -1, MessageChars: -1,
		NoteChars: -1, MemoryChars: -1, EnvelopeBytes: -1, ConversationsPerHour: -1}
}

// unpaced lifts the edge's envelope rates (20/s per connection, 50/s per
// user) for a client that sends turn after turn at once, faster than any
// person: paced by them, a back-to-back turn measures the quota (one
// envelope every 50 ms), not the path.
func unpaced(c *gateway.Config) {
	c.Quotas.Edge.SessionRate, c.Quotas.Edge.SessionBurst = 1e6, 1e6
	c.Quotas.Edge.UserRate, c.Quotas.Edge.UserBurst = 1e6, 1e6
}

// writeProbe times one acknowledged JetStream publish to a stream of its
// own on the stack's server: with file storage, one synced write on the
// same server and disk as the turns' (the floor's unit); with memory
// storage, the same round trip without the disk.
type writeProbe struct {
	js      jetstream.JetStream
	subject string
	data    []byte

	mu  sync.Mutex
	n   int
	lat []time.Duration
}

func newWriteProbe(tb testing.TB, js jetstream.JetStream, name string, storage jetstream.StorageType) *writeProbe {
	tb.Helper()
	p := &writeProbe{js: js, subject: "bench.probe." + name, data: make([]byte, 256)} // about an envelope's size
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// As the streams of pkg/bus: limits, one replica, Nats-Msg-Id de-duplication.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BENCH_PROBE_" + name, Subjects: []string{p.subject},
		Storage: storage, Retention: jetstream.LimitsPolicy, Discard: jetstream.DiscardOld, Replicas: 1, Duplicates: 2 * time.Minute}); err != nil {
		tb.Fatal(err)
	}
	for range 5 {
		p.write(tb)
	}
	p.reset()
	return p
}

// write publishes once and keeps the time to the PubAck.
func (p *writeProbe) write(tb testing.TB) {
	p.mu.Lock()
	p.n++
	id := p.subject + ":" + strconv.Itoa(p.n)
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t0 := time.Now()
	if _, err := p.js.Publish(ctx, p.subject, p.data, jetstream.WithMsgID(id)); err != nil {
		tb.Error(err)
		return
	}
	d := time.Since(t0)
	p.mu.Lock()
	p.lat = append(p.lat, d)
	p.mu.Unlock()
}

func (p *writeProbe) reset() {
	p.mu.Lock()
	p.lat = nil
	p.mu.Unlock()
}

func (p *writeProbe) p50() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return quantile(p.lat, 0.5)
}

// probes are the two write probes of one benchmark.
type probes struct{ file, mem *writeProbe }

func newProbes(tb testing.TB, s *stack) probes {
	return probes{file: newWriteProbe(tb, s.js, "FILE", jetstream.FileStorage), mem: newWriteProbe(tb, s.js, "MEM", jetstream.MemoryStorage)}
}

func (p probes) write(tb testing.TB) {
	p.file.write(tb)
	p.mem.write(tb)
}

func (p probes) reset() {
	p.file.reset()
	p.mem.reset()
}

// quantile of lat in ms (0 for none).
func quantile(lat []time.Duration, q float64) float64 {
	if len(lat) == 0 {
		return 0
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	return float64(s[min(len(s)-1, int(q*float64(len(s))))].Microseconds()) / 1000
}

// streamSequences is the last sequence of every stream but the probes'.
func streamSequences(tb testing.TB, js jetstream.JetStream) map[string]uint64 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := map[string]uint64{}
	names := js.StreamNames(ctx)
	for name := range names.Name() {
		if strings.HasPrefix(name, "BENCH_PROBE_") {
			continue
		}
		st, err := js.Stream(ctx, name)
		if err != nil {
			tb.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		out[name] = info.State.LastSeq
	}
	if err := names.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// conversationsRead is what CONVERSATIONS holds of the benchmark's
// conversations, read back with bus.Replay.
type conversationsRead struct {
	stored map[uint64]time.Time // JetStream's timestamp (when the server took the message), by sequence
	user   map[string]time.Time // the same, by UserMessage id
	// pathConv is how many envelopes were stored from each turn's
	// UserMessage up to the first AssistantSentence of its answer, both
	// included, summed over pathTurns turns.
	pathConv, pathTurns int
}

func readConversations(tb testing.TB, s *stack, cids []string) conversationsRead {
	tb.Helper()
	r := conversationsRead{stored: map[uint64]time.Time{}, user: map[string]time.Time{}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, cid := range cids {
		open, n := false, 0
		err := bus.Replay(ctx, s.nc, bus.StreamConversations, subjects.Conversation(cid), 0, func(m bus.Stored) error {
			r.stored[m.Sequence] = m.Time
			env, err := protocol.Decode(m.Data)
			if err != nil {
				return err
			}
			switch b := env.Body.(type) {
			case *protocol.UserMessage:
				r.user[b.ID] = m.Time
				open, n = true, 1
			case *protocol.AssistantSentence:
				if open {
					r.pathConv += n + 1
					r.pathTurns++
					open = false
				}
			default:
				if open {
					n++
				}
			}
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
	return r
}

// writeCount is what the streams stored during the measured turns.
type writeCount struct {
	turns int               // measured turns
	delta map[string]uint64 // messages stored per stream (sequence deltas)
	conversationsRead
}

// pathWrites is the synced writes on one turn's path as stored: the
// conversation's own envelopes up to its first sentence, and the LLM_TURNS
// copy of its message (the queue stores nothing else).
func (w writeCount) pathWrites() float64 {
	if w.pathTurns == 0 || w.turns == 0 {
		return 0
	}
	return float64(w.pathConv)/float64(w.pathTurns) + float64(w.delta["LLM_TURNS"])/float64(w.turns)
}

// countWrites compares the stream sequences before and after turns
// measured turns, and reads back conversations cids.
func countWrites(tb testing.TB, s *stack, before map[string]uint64, turns int, cids []string) writeCount {
	tb.Helper()
	w := writeCount{turns: turns, delta: map[string]uint64{}}
	for name, seq := range streamSequences(tb, s.js) {
		w.delta[name] = seq - before[name]
	}
	w.conversationsRead = readConversations(tb, s, cids)
	return w
}

// storedHops are the steps of a turn seen from outside the services: the
// client's clock and JetStream's timestamps (when the server took each
// message, before writing and fsyncing it).
var storedHops = []struct {
	name string
	span func(r turnRecord, c conversationsRead) (from, to time.Time)
}{
	// WebSocket, the gateway's edge, the publish.
	{"sent-to-user-stored", func(r turnRecord, c conversationsRead) (time.Time, time.Time) { return r.sent, c.user[r.userID] }},
	// The message's fsync, LLM_TURNS sourcing it (a fsync), delivery to the
	// llm, what the llm reads before publishing StartAnswer.
	{"user-to-start-stored", func(r turnRecord, c conversationsRead) (time.Time, time.Time) {
		return c.user[r.userID], c.stored[r.startSeq]
	}},
	// memory.search (history.get when asked), the model, the sentence
	// published once StartAnswer's PubAck is back.
	{"start-to-sentence-stored", func(r turnRecord, c conversationsRead) (time.Time, time.Time) {
		return c.stored[r.startSeq], c.stored[r.firstSeq]
	}},
	// The sentence's fsync, the gateway's ordered consumer, the WebSocket.
	{"sentence-stored-to-client", func(r turnRecord, c conversationsRead) (time.Time, time.Time) {
		return c.stored[r.firstSeq], r.firstAt
	}},
}

// report puts the figures of one run: the turns' p50 and p99 (UserMessage
// sent → first AssistantSentence received), the synced writes on a turn's
// path (counted at run time), one synced write's p50 measured in the same
// run (and the same publish to a memory stream), the fsync floor of issue
// 15 (floor = writes × synced write p50 + 2 ms), and the p50 of each
// stored hop.
func report(b *testing.B, recs []turnRecord, p probes, w writeCount) {
	b.Helper()
	lat := make([]time.Duration, len(recs))
	hop := make([][]time.Duration, len(storedHops))
	for i, r := range recs {
		lat[i] = r.first()
		for j, h := range storedHops {
			if from, to := h.span(r, w.conversationsRead); !from.IsZero() && !to.IsZero() {
				hop[j] = append(hop[j], to.Sub(from))
			}
		}
	}
	p50 := quantile(lat, 0.50)
	writes, sync := w.pathWrites(), p.file.p50()
	floor := writes*sync + 2
	b.ReportMetric(p50, "p50-ms")
	b.ReportMetric(quantile(lat, 0.99), "p99-ms")
	b.ReportMetric(float64(len(lat)), "turns")
	b.ReportMetric(writes, "synced-writes-per-turn")
	b.ReportMetric(sync, "sync-write-p50-ms")
	b.ReportMetric(p.mem.p50(), "mem-write-p50-ms")
	b.ReportMetric(floor, "floor-ms")
	b.ReportMetric(p50-floor, "overhead-over-floor-ms")
	for j, h := range storedHops {
		b.ReportMetric(quantile(hop[j], 0.5), "hop-"+h.name+"-ms")
	}
	b.ReportMetric(0, "ns/op")
	var streams []string
	for name, d := range w.delta {
		if d != 0 {
			streams = append(streams, fmt.Sprintf("%s %.2f", name, float64(d)/float64(max(w.turns, 1))))
		}
	}
	slices.Sort(streams)
	b.Logf("messages stored per turn: %v; CONVERSATIONS up to the first sentence: %.2f", streams, float64(w.pathConv)/float64(max(w.pathTurns, 1)))
	if writes != pathSyncedWrites {
		b.Errorf("%.2f synced writes per turn on the path at run time, %d read from the code (pathSyncedWrites): the floor's count is stale", writes, pathSyncedWrites)
	}
}

// BenchmarkTextTurnOverhead: UserMessage sent on the WebSocket → first
// AssistantSentence received, the fake model answering at once. The whole
// path is real: gateway, JetStream (fsync on every write), the llm's turn
// queue, history.get, memory.search (answered from the search the memory
// service starts when the message is published: embeddings + pgvector),
// persistence.
// After each turn one synced write (and one memory write) is timed on the
// same server: the floor is measured in the same run as the turns.
func BenchmarkTextTurnOverhead(b *testing.B) {
	b.Run("budgets=on", func(b *testing.B) { textTurnOverhead(b, unpaced) })
	b.Run("budgets=off", func(b *testing.B) { textTurnOverhead(b, func(c *gateway.Config) { unpaced(c); budgetsOff(c) }) })
}

// textTurnOverhead is BenchmarkTextTurnOverhead with the gateway's
// configuration changed by gw.
func textTurnOverhead(b *testing.B, gw func(*gateway.Config)) {
	s := newStack(b, options{gateway: gw})
	c := s.open(b, aliceKey, "", 0)
	p := newProbes(b, s)
	for range 20 { // warm up connections, caches and the turn consumers
		c.turnLatency()
		p.write(b)
	}
	p.reset()
	before := streamSequences(b, s.js)
	recs := make([]turnRecord, 0, b.N)
	b.ResetTimer()
	for range b.N {
		r, err := c.measuredTurn("Hello there, how are you?")
		if err != nil {
			b.Fatal(err)
		}
		recs = append(recs, r)
		p.write(b)
	}
	b.StopTimer()
	report(b, recs, p, countWrites(b, s, before, b.N, []string{c.cid}))
}

// loadTurns has every client send a message every `every` (random phase)
// until `run` has passed, and returns the record of every turn. probe, when
// not nil, is called every 20 ms meanwhile.
func loadTurns(b *testing.B, clients []*client, every, run time.Duration, probe func()) []turnRecord {
	var mu sync.Mutex
	var recs []turnRecord
	var wg sync.WaitGroup
	end := time.Now().Add(run)
	for _, c := range clients {
		wg.Go(func() {
			next := time.Now().Add(time.Duration(rand.Int64N(int64(every))))
			for {
				time.Sleep(time.Until(next)) // the load's pacing, not a wait for a condition
				if time.Now().After(end) {
					return
				}
				r, err := c.measuredTurn("Hello there, how are you?")
				if err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				recs = append(recs, r)
				mu.Unlock()
				next = next.Add(every)
			}
		})
	}
	if probe != nil {
		wg.Go(func() {
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for now := range tick.C {
				if now.After(end) {
					return
				}
				probe()
			}
		})
	}
	wg.Wait()
	return recs
}

// openMany opens n conversations, each on a WebSocket of its own.
func openMany(b *testing.B, s *stack, n int) ([]*client, []string) {
	clients := make([]*client, n)
	cids := make([]string, n)
	for i := range clients {
		clients[i] = s.open(b, aliceKey, "", 0)
		cids[i] = clients[i].cid
	}
	for _, c := range clients[:10] {
		c.turnLatency()
	}
	return clients, cids
}

// BenchmarkTextTurnOverhead200: 200 conversations, each sending a message
// every 2 s (random phase), for 20 s; the latency of every turn. A synced
// write (and a memory write) is timed every 20 ms during the run.
func BenchmarkTextTurnOverhead200(b *testing.B) {
	const conversations, every, run = 200, 2 * time.Second, 20 * time.Second
	s := newStack(b, options{gateway: manyConnections(conversations)})
	clients, cids := openMany(b, s, conversations)
	p := newProbes(b, s)
	b.ResetTimer()
	for range b.N {
		p.reset()
		before := streamSequences(b, s.js)
		recs := loadTurns(b, clients, every, run, func() { p.write(b) })
		b.StopTimer()
		report(b, recs, p, countWrites(b, s, before, len(recs), cids))
		b.StartTimer()
	}
}
