package roomagent_test

import (
	"context"
	"math"
	"net/http"
	"syscall"
	"testing"
	"time"

	lksdk "github.com/livekit/server-sdk-go/v2"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/svcmain/svcmaintest"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/lktest"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/pkg/testkit/netns"
	"github.com/alicia-voice/alicia/pkg/testkit/voiceclient"
	roomagent "github.com/alicia-voice/alicia/services/room-agent"
)

// The drain test runs livekit-server in the package's own network namespace.
func TestMain(m *testing.M) { netns.Main(m) }

// TestDrainFinishesTheTurnThenHandsTheRoomBack sends SIGTERM to the
// room-agent binary while it plays a 4-second answer in a room: /healthz
// reports draining, a dispatch published after the signal is not taken, the
// answer plays to its end (and its SentencePlayout is stored) before the
// agent leaves, and the process exits 0. Another agent then takes both
// requests: it joins the first room again (the request was handed back)
// and the second.
func TestDrainFinishesTheTurnThenHandsTheRoomBack(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and signals a process; skipped with -short")
	}
	lk := lktest.Start(t)
	ns := natstest.Run(t)
	nc := natstest.Connect(t, ns)
	js := natstest.JetStream(t, nc)
	pub := bus.NewPublisher(js)

	addr := testkit.FreeAddr(t)
	bin := svcmaintest.Build(t, "./cmd/room-agent")
	p := svcmaintest.Start(t, bin, "ALICIA_NATS_URL="+ns.ClientURL(), "ALICIA_LIVEKIT_URL="+lk.URL,
		"ALICIA_LIVEKIT_API_KEY="+lk.APIKey, "ALICIA_LIVEKIT_API_SECRET="+lk.APISecret,
		"ALICIA_AGENT_EMPTY_TIMEOUT=60s", "ALICIA_ROOM_AGENT_METRICS_ADDR="+addr,
		"ALICIA_SHUTDOWN_TIMEOUT=40s", "ALICIA_LOG_LEVEL=warn")
	testkit.EventuallyNoError(t, 30*time.Second, testkit.Answers("http://"+addr+"/healthz", http.StatusOK, "ok"), "room-agent ready")

	dispatch := func(cid string) {
		t.Helper()
		env := protocol.New(cid, &protocol.AgentDispatch{ConversationID: cid, Room: protocol.RoomName(cid),
			UserID: protocol.Ptr("alice"), RequestedAt: time.Now().UnixMilli()})
		data, err := protocol.Encode(env)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(context.Background(), subjects.Dispatch("alice", cid), data); err != nil {
			t.Fatal(err)
		}
	}
	cid := protocol.NewID("ac")
	dispatch(cid)
	u := voiceclient.Join(t, lk.URL, lk.Token(t, protocol.RoomName(cid), "alice"), true)
	// Answered: the agent's session runs, so it follows the conversation.
	u.Configure(&protocol.Configuration{ConversationID: &cid, Features: []protocol.ConfigurationFeaturesElem{protocol.ConfigurationFeaturesElemStreaming}}, cid)

	// The tts's part: a one-sentence voice answer of 4 s.
	turn, sid := protocol.NewID("am"), protocol.NewID("ams")
	if _, err := pub.PublishServer(context.Background(), protocol.New(cid, &protocol.StartAnswer{ID: turn, PreviousID: protocol.NewID("um"),
		ConversationID: cid, AnswerType: protocol.Ptr(protocol.StartAnswerAnswerTypeVoice)}), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := pub.PublishServer(context.Background(), protocol.New(cid, &protocol.AssistantSentence{ID: &sid, PreviousID: turn,
		ConversationID: cid, Sequence: 1, Text: "A long answer.", IsFinal: protocol.Ptr(true)}), ""); err != nil {
		t.Fatal(err)
	}
	const spoken = 4 * time.Second
	tone := make([]int16, int(spoken/time.Second)*24000)
	for i := range tone {
		tone[i] = int16(8000 * math.Sin(2*math.Pi*440*float64(i)/24000))
	}
	const chunk = 2400 // 100 ms
	for i := 0; i*chunk < len(tone); i++ {
		end := min((i+1)*chunk, len(tone))
		sa := &protocol.SpeechAudio{ConversationID: cid, MessageID: turn, SentenceID: sid, Sequence: 1, Chunk: int32(i),
			Last: end == len(tone), FinalSentence: protocol.Ptr(true), Format: "pcm_s16le_24000", Data: audio.Bytes(tone[i*chunk : end])}
		data, err := protocol.Encode(protocol.New(cid, sa))
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Publish(subjects.AudioOut(cid), data); err != nil {
			t.Fatal(err)
		}
	}
	started := time.Now()
	testkit.Eventually(t, 20*time.Second, func() bool { n, _, _ := voiceclient.Loud(u.Heard(), started); return n >= 10 }, "the answer playing")

	p.Signal(syscall.SIGTERM)
	testkit.EventuallyNoError(t, 30*time.Second, testkit.Answers("http://"+addr+"/healthz", http.StatusServiceUnavailable, "draining"),
		"/healthz does not report draining")
	// A room requested after the signal: someone waits in it.
	later := protocol.NewID("ac")
	dispatch(later)
	watcher, err := lksdk.ConnectToRoomWithToken(lk.URL, lk.Token(t, protocol.RoomName(later), "alice-2"), lksdk.NewRoomCallback())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(watcher.Disconnect)
	agentIn := func(r *lksdk.Room) bool { return r.GetParticipantByIdentity(voiceclient.AgentIdentity) != nil }
	for exited := false; !exited; {
		select {
		case <-p.Exited():
			exited = true
		case <-time.After(20 * time.Millisecond):
		}
		if agentIn(watcher) {
			t.Fatal("the draining agent joined a room requested after the signal")
		}
	}
	if code := p.Wait(time.Second); code != 0 {
		t.Fatalf("room-agent exited %d after SIGTERM, want 0", code)
	}
	if n, first, last := voiceclient.Loud(u.Heard(), started); last.Sub(first) < spoken-500*time.Millisecond {
		t.Fatalf("heard %d loud frames over %v, want the whole %v answer before the agent left", n, last.Sub(first), spoken)
	}
	st, err := js.Stream(context.Background(), bus.StreamConversations)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := st.GetLastMsgForSubject(context.Background(), subjects.Agent(cid, protocol.TypeSentencePlayout))
	if err != nil {
		t.Fatalf("no SentencePlayout stored for the answer: %v", err)
	}
	env, err := protocol.Decode(raw.Data)
	if err != nil {
		t.Fatal(err)
	}
	if sp, ok := env.Body.(*protocol.SentencePlayout); !ok || sp.Status != protocol.SentencePlayoutStatusPlayed || sp.SentenceID != sid ||
		time.Duration(sp.PlayedMs)*time.Millisecond < spoken-200*time.Millisecond {
		t.Fatalf("SentencePlayout = %+v, want the sentence played whole", env.Body)
	}
	testkit.Eventually(t, 20*time.Second, func() bool { return !agentIn(u.Room) }, "the agent still in the room after its exit")

	// Another agent takes the room handed back and the one left waiting.
	cfg := roomagent.DefaultConfig()
	cfg.NATSURL, cfg.LiveKitURL, cfg.LiveKitAPIKey, cfg.LiveKitAPISecret = ns.ClientURL(), lk.URL, lk.APIKey, lk.APISecret
	testkit.Go(t, "room-agent", func(ctx context.Context) error { return roomagent.Run(ctx, cfg, zerolog.Nop()) })
	testkit.Eventually(t, 30*time.Second, func() bool { return agentIn(u.Room) && agentIn(watcher) },
		"another agent did not join both rooms")
}
