package voice_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit/voiceclient"
)

// agentProcess runs the room-agent binary (built once per test binary) as
// its own process, so a test can kill it the hard way.
func (s *stack) agentProcess(t testing.TB, env ...string) *exec.Cmd {
	t.Helper()
	bin := agentBinary(t)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "ALICIA_NATS_URL="+s.natsURL, "ALICIA_LIVEKIT_URL="+s.lk.URL,
		"ALICIA_LIVEKIT_API_KEY="+s.lk.APIKey, "ALICIA_LIVEKIT_API_SECRET="+s.lk.APISecret,
		"ALICIA_AGENT_LEASE=2s", "ALICIA_AGENT_EMPTY_TIMEOUT=30s", "ALICIA_LOG_LEVEL=warn",
		"ALICIA_ROOM_AGENT_METRICS_ADDR="+agentMetricsAddr)
	cmd.Env = append(cmd.Env, env...)
	if os.Getenv("ALICIA_TEST_LOG") != "" {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

var builtAgent string

// agentMetricsAddr serves the agent process's /metrics and /debug/pprof (the
// namespace's own loopback; one agent process at a time uses it).
const agentMetricsAddr = "127.0.0.1:19464"

func agentBinary(t testing.TB) string {
	t.Helper()
	if builtAgent != "" {
		return builtAgent
	}
	dir, err := os.MkdirTemp("", "alicia-agent-bin")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "room-agent")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/alicia-voice/alicia/services/room-agent/cmd/room-agent").CombinedOutput()
	if err != nil {
		t.Fatalf("build room-agent: %v\n%s", err, out)
	}
	builtAgent = bin
	return bin
}

// TestDeadAgentIsReplaced: the agent in a room is killed (no goodbye, no
// hand-back); after its dispatch lease runs out another agent takes the
// request and joins, and the conversation goes on through it.
func TestDeadAgentIsReplaced(t *testing.T) {
	s := newStack(t, options{noAgent: true, answer: "Still here. What next?"})
	first := s.agentProcess(t)
	cid := s.conversation()
	u := voiceclient.Join(t, s.lk.URL, s.token(cid), false)
	u.Configure(&protocol.Configuration{ConversationID: &cid, Features: []protocol.ConfigurationFeaturesElem{protocol.ConfigurationFeaturesElemStreaming}}, cid)

	second := s.agentProcess(t) // idle: the request is held by the first
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	killed := time.Now()

	// The replacement joins under the same identity (LiveKit drops the dead
	// one's session); the user configures the new data-channel session.
	u.Configure(&protocol.Configuration{ConversationID: &cid, Features: []protocol.ConfigurationFeaturesElem{protocol.ConfigurationFeaturesElemStreaming}}, cid)
	t.Logf("replacement agent answered %v after the kill", time.Since(killed).Round(time.Millisecond))
	u.Send(&protocol.UserMessage{ID: protocol.NewID("am"), ConversationID: cid, Content: "Are you there?"}, cid)
	u.WaitFor(20*time.Second, "no answer through the replacement agent", func(e protocol.Envelope) bool {
		b, ok := e.Body.(*protocol.AssistantSentence)
		return ok && b.IsFinal != nil && *b.IsFinal
	})
	if second.ProcessState != nil {
		t.Fatalf("second agent exited: %v", second.ProcessState)
	}
}
