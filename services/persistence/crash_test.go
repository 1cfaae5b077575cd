package persistence_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

const (
	crashConversations = 500
	crashPerConv       = 20 // Configuration, UserMessage, StartAnswer, 15 sentences, tool request + result
)

// TestCrashDuringBurst SIGKILLs the persistence process in the middle of a
// burst of 10,000 envelopes, restarts it and checks that every envelope was
// applied exactly once, with one transaction per batch and with batches split
// over parallel shards.
func TestCrashDuringBurst(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a process; skipped with -short")
	}
	for _, shards := range []string{"1", "2"} {
		t.Run("shards="+shards, func(t *testing.T) { crashDuringBurst(t, shards) })
	}
}

func crashDuringBurst(t *testing.T, shards string) {
	s := newStack(t)
	bin := buildPersistence(t)
	run := func() *exec.Cmd {
		return startPersistence(t, bin, s, "ALICIA_PERSISTENCE_SHARDS="+shards)
	}

	proc := run()
	t.Cleanup(func() { _ = proc.Process.Kill(); _ = proc.Wait() })
	last := publishBurst(t, s, func(w int) {
		if w != 100 {
			return
		}
		// Kill it once it is well into the burst.
		testkit.Eventually(t, 30*time.Second, func() bool {
			return s.queryInt(`SELECT COALESCE(max(last_seq), 0) FROM alicia_stream_offsets WHERE stream = $1`, bus.StreamConversations) > 1000
		}, "persistence never got going")
		if err := proc.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = proc.Wait()
		t.Logf("killed at offset %d", s.queryInt(`SELECT max(last_seq) FROM alicia_stream_offsets`))
		proc = run()
	})
	checkBurstApplied(t, s, last)
}

// startPersistence starts the service's binary on s with the burst's
// settings and env added; the test kills it at its end.
func startPersistence(t *testing.T, bin string, s *stack, env ...string) *exec.Cmd {
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "ALICIA_NATS_URL="+s.cfg.NATSURL, "ALICIA_POSTGRES_URL="+s.cfg.PostgresURL,
		"ALICIA_LOG_LEVEL=warn", "ALICIA_PERSISTENCE_BATCH=200")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// publishBurst publishes crashConversations conversations of crashPerConv
// envelopes each, interleaved 50 conversations at a time as a live server
// would, calling window after each window of envelopes it published (w: the
// first conversation of the window). It returns the last sequence.
func publishBurst(t *testing.T, s *stack, window func(w int)) uint64 {
	ctx := context.Background()
	var last uint64
	var envs []protocol.Envelope
	for c := range crashConversations {
		cid := fmt.Sprintf("ac_crash%04d", c)
		user, answer := "am_u"+cid, "am_a"+cid
		envs = append(envs,
			protocol.Envelope{StanzaID: 1, ConversationID: cid, Type: protocol.TypeConfiguration, Body: &protocol.Configuration{}},
			protocol.Envelope{StanzaID: 2, ConversationID: cid, Type: protocol.TypeUserMessage, Body: &protocol.UserMessage{ID: user, ConversationID: cid, Content: "hi"}},
			protocol.Envelope{ConversationID: cid, Type: protocol.TypeStartAnswer, Body: &protocol.StartAnswer{ID: answer, PreviousID: user, ConversationID: cid}},
		)
		for i := 1; i <= 15; i++ {
			envs = append(envs, protocol.Envelope{ConversationID: cid, Type: protocol.TypeAssistantSentence,
				Body: &protocol.AssistantSentence{PreviousID: answer, ConversationID: cid, Sequence: int32(i), Text: fmt.Sprintf("S%d.", i), IsFinal: ptr(i == 15)}})
		}
		envs = append(envs,
			protocol.Envelope{ConversationID: cid, Type: protocol.TypeToolUseRequest, Body: &protocol.ToolUseRequest{ID: "atu" + cid, MessageID: answer, ConversationID: cid, ToolName: "calculator", Parameters: map[string]any{"expression": "1+1"}, Execution: "server"}},
			protocol.Envelope{ConversationID: cid, Type: protocol.TypeToolUseResult, Body: &protocol.ToolUseResult{ID: "atr" + cid, RequestID: "atu" + cid, ConversationID: cid, Success: true, Result: 2}},
		)
	}
	for w := 0; w < crashConversations; w += 50 {
		for k := range crashPerConv {
			for c := w; c < w+50; c++ {
				env := envs[c*crashPerConv+k]
				data, err := protocol.Encode(env)
				if err != nil {
					t.Fatal(err)
				}
				ack, err := s.js.Publish(ctx, subjectOf(env), data)
				if err != nil {
					t.Fatal(err)
				}
				last = ack.Sequence
			}
		}
		window(w)
	}
	if last != crashConversations*crashPerConv {
		t.Fatalf("published %d envelopes, want %d", last, crashConversations*crashPerConv)
	}
	return last
}

// checkBurstApplied waits until every partition is applied up to last and
// checks that every envelope of the burst was applied exactly once.
func checkBurstApplied(t *testing.T, s *stack, last uint64) {
	ctx := context.Background()
	testkit.Eventually(t, 60*time.Second, func() bool {
		// Every shard commits its part of a batch in its own transaction: all are done when the lowest offset is.
		return s.queryInt(`SELECT COALESCE(min(last_seq), 0) FROM alicia_stream_offsets WHERE stream = $1`, bus.StreamConversations) == int(last)
	}, "persistence did not catch up")

	for _, c := range []struct {
		sql  string
		want int
	}{
		{`SELECT count(*) FROM alicia_conversations`, crashConversations},
		{`SELECT count(*) FROM alicia_messages`, 2 * crashConversations},
		{`SELECT count(*) FROM alicia_messages WHERE message_role = 'assistant' AND completion_status = 'completed' AND contents = 'S1. S2. S3. S4. S5. S6. S7. S8. S9. S10. S11. S12. S13. S14. S15.'`, crashConversations},
		{`SELECT count(*) FROM alicia_sentences`, 15 * crashConversations},
		{`SELECT count(DISTINCT (message_id, sentence_sequence_number)) FROM alicia_sentences`, 15 * crashConversations},
		{`SELECT count(*) FROM alicia_tool_uses WHERE status = 'success' AND sequence_number = 1`, crashConversations},
		{`SELECT count(*) FROM alicia_conversations WHERE last_client_stanza_id = 2 AND tip_message_id LIKE 'am_a%'`, crashConversations},
	} {
		if got := s.queryInt(c.sql); got != c.want {
			t.Errorf("%s = %d, want %d", c.sql, got, c.want)
		}
	}
	if t.Failed() {
		rows, _ := s.pool.Query(ctx, `SELECT id, message_id, status::text, sequence_number, created_at FROM alicia_tool_uses WHERE NOT (status = 'success' AND sequence_number = 1)`)
		for rows.Next() {
			var id, mid, st string
			var seq int
			var at time.Time
			_ = rows.Scan(&id, &mid, &st, &seq, &at)
			t.Logf("tool use %s %s %s seq %d at %s", id, mid, st, seq, at)
		}
	}
}

func subjectOf(env protocol.Envelope) string {
	switch env.Type {
	case protocol.TypeConfiguration, protocol.TypeUserMessage:
		return subjectsClient(env)
	default:
		return subjectsServer(env)
	}
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// buildPersistence builds the service binary once per test process.
func buildPersistence(t *testing.T) string {
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "alicia-persistence-bin")
		if buildErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", filepath.Join(buildDir, "persistence"), "./cmd/persistence").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, "persistence")
}
