package upcmd_test

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alicia-voice/alicia/pkg/devtools"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/localpg"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/pgtest"
	"github.com/alicia-voice/alicia/pkg/testkit/uptest"
)

// TestFirstRunOnEmptyDatabase runs the real `alicia up` binary the way a new
// user does: against a database with nothing in it (not even the pgvector
// extension), a JetStream store that does not exist yet and output to a
// pipe. Every service must come up (memory registers the pgvector types,
// which only exist once the migrations ran), and a text conversation of two
// turns with `alicia chat` must be answered and stored. Its log is plain
// text at the info level: no colour codes in a pipe, no debug lines.
func TestFirstRunOnEmptyDatabase(t *testing.T) {
	devtools.Need(t, devtools.LiveKit)
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		testkit.Missing(t, "%v", err)
	}
	pgURL := pgtest.NewEmptyURL(t)
	t.Cleanup(func() { // up made the database's roles
		if err := localpg.DropRoles(context.Background(), pgURL); err != nil {
			t.Errorf("drop roles: %v", err)
		}
	})
	bin := uptest.Build(t)
	model := fakeopenai.New(t, fakeopenai.WithFallback(fakeopenai.Text("Hello from a fresh install.")))
	embeddings := fakeopenai.New(t)
	// What a user exports before `alicia up` is there for their later
	// commands too.
	stackEnv := map[string]string{"ALICIA_DATA_DIR": filepath.Join(t.TempDir(), "new-data-dir"), "ALICIA_NATS_URL": "nats://" + testkit.FreeAddr(t)}
	up := uptest.Start(t, bin, uptest.UserEnv(map[string]string{
		"ALICIA_POSTGRES_URL":  pgURL,
		"ALICIA_DATA_DIR":      stackEnv["ALICIA_DATA_DIR"],
		"ALICIA_NATS_URL":      stackEnv["ALICIA_NATS_URL"],
		"ALICIA_HTTP_ADDR":     "127.0.0.1:0",
		"ALICIA_LLM_URL":       model.URL(),
		"ALICIA_LLM_MODEL":     "fake-chat",
		"ALICIA_EMBEDDING_URL": embeddings.URL(), // memory search on: the pgvector types are used
		"ALICIA_ASR_URL":       "http://" + testkit.FreeAddr(t) + "/v1",
		"ALICIA_LIVEKIT_PORT":  "0", "ALICIA_LIVEKIT_RTC_TCP_PORT": "0", "ALICIA_LIVEKIT_RTC_UDP_PORT": "0",
		// Loopback only: no LAN address of the machine in a test.
		"ALICIA_LIVEKIT_NODE_IP": "127.0.0.1", "ALICIA_HTTPS_ADDR": "127.0.0.1:0",
	}), "up")
	base, key := up.Field("HTTP:"), up.Field("API key:")

	chat := exec.Command(bin, "chat", "--url", base)
	chat.Env = uptest.UserEnv(map[string]string{"ALICIA_API_KEY": key})
	chat.Stdin = strings.NewReader("Hello?\nAnd once more?\n")
	var chatOut, chatErr bytes.Buffer
	chat.Stdout, chat.Stderr = &chatOut, &chatErr
	if err := chat.Run(); err != nil {
		t.Fatalf("alicia chat: %v\n%s\n%s", err, chatOut.String(), chatErr.String())
	}
	if n := strings.Count(chatOut.String(), "Hello from a fresh install."); n != 2 {
		t.Fatalf("chat printed the answer %d times, want 2:\n%s\n%s", n, chatOut.String(), chatErr.String())
	}

	pool, err := pgxpool.New(context.Background(), pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	testkit.Eventually(t, 30*time.Second, func() bool {
		var users, answers int
		_ = pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE message_role = 'user'),
			count(*) FILTER (WHERE message_role = 'assistant' AND completion_status = 'completed')
			FROM alicia_messages`).Scan(&users, &answers)
		return users == 2 && answers == 2
	}, "the conversation's two turns were not stored")

	// The README's replay line, as the same user: it finds up's admin URL.
	var convID string
	if err := pool.QueryRow(context.Background(), `SELECT conversation_id FROM alicia_messages LIMIT 1`).Scan(&convID); err != nil {
		t.Fatal(err)
	}
	replay := exec.Command(bin, "replay", convID)
	replay.Env = uptest.UserEnv(stackEnv)
	if out, err := replay.CombinedOutput(); err != nil || !strings.Contains(string(out), "And once more?") ||
		strings.Count(string(out), "Hello from a fresh install.") < 2 {
		t.Fatalf("alicia replay %s: %v\n%s", convID, err, out)
	}
	// Another user (no admin URL in their data directory) is told which
	// credential to give, in one line.
	replay = exec.Command(bin, "replay", convID)
	replay.Env = uptest.UserEnv(map[string]string{"ALICIA_NATS_URL": stackEnv["ALICIA_NATS_URL"], "ALICIA_DATA_DIR": t.TempDir()})
	if out, err := replay.CombinedOutput(); err == nil || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 ||
		!strings.Contains(string(out), "refused a connection without credentials") || !strings.Contains(string(out), "ALICIA_NATS_USER=admin") {
		t.Fatalf("alicia replay without credentials: %v\n%s", err, out)
	}

	up.Stop(t)
	if l := up.Log.String(); strings.Contains(l, "\x1b[") || strings.Contains(l, " DBG ") {
		t.Fatalf("the log written to a pipe has colour codes or debug lines:\n%s", l)
	}
}
