package voiceclient_test

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/livekit/protocol/logger"
	lksdk "github.com/livekit/server-sdk-go/v2"
	"github.com/pion/webrtc/v4"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/lktest"
	"github.com/alicia-voice/alicia/pkg/testkit/netns"
	"github.com/alicia-voice/alicia/pkg/testkit/voiceclient"
)

func TestMain(m *testing.M) {
	lksdk.SetLogger(logger.GetDiscardLogger())
	netns.Main(m)
}

// echoAgent joins room as the agent and sends every data packet it gets
// back to its sender; it reports when it has subscribed to an audio track.
func echoAgent(t *testing.T, lk *lktest.Server, room string) (micHeard func() bool) {
	t.Helper()
	var mu sync.Mutex
	var subscribed bool
	var agent *lksdk.Room
	cb := lksdk.NewRoomCallback()
	cb.OnDataPacket = func(p lksdk.DataPacket, params lksdk.DataReceiveParams) {
		d, ok := p.(*lksdk.UserDataPacket)
		if !ok {
			return
		}
		mu.Lock()
		r := agent
		mu.Unlock()
		if err := r.LocalParticipant.PublishDataPacket(lksdk.UserData(d.Payload), lksdk.WithDataPublishReliable(true),
			lksdk.WithDataPublishDestination([]string{params.SenderIdentity})); err != nil {
			t.Errorf("echo: %v", err)
		}
	}
	cb.OnTrackSubscribed = func(track *webrtc.TrackRemote, _ *lksdk.RemoteTrackPublication, _ *lksdk.RemoteParticipant) {
		if track.Kind() == webrtc.RTPCodecTypeAudio {
			mu.Lock()
			subscribed = true
			mu.Unlock()
		}
	}
	r, err := lksdk.ConnectToRoomWithToken(lk.URL, lk.Token(t, room, voiceclient.AgentIdentity), cb)
	if err != nil {
		t.Fatalf("agent joins: %v", err)
	}
	mu.Lock()
	agent = r
	mu.Unlock()
	t.Cleanup(r.Disconnect)
	return func() bool { mu.Lock(); defer mu.Unlock(); return subscribed }
}

// TestUser: Configure, Send and ContinueStanzas against an agent that echoes
// the data channel, ReceivedAt beside Received, and WaitSent waiting for the
// microphone to send what Say queued (a second of audio: about a second).
func TestUser(t *testing.T) {
	lk := lktest.Start(t)
	const room, cid = "conv_ac_voiceclient", "ac_voiceclient"
	micHeard := echoAgent(t, lk, room)
	u := voiceclient.Join(t, lk.URL, lk.Token(t, room, "alice"), true)

	u.Configure(&protocol.Configuration{ConversationID: new(cid)}, cid)
	u.Send(&protocol.UserMessage{ID: protocol.NewID("am"), ConversationID: cid, Content: "hello"}, cid)
	got := u.WaitFor(10*time.Second, "no echo", func(e protocol.Envelope) bool { return e.Type == protocol.TypeUserMessage })
	if got.StanzaID != 2 {
		t.Fatalf("UserMessage stanza %d, want 2 (after the Configuration)", got.StanzaID)
	}
	envs, at := u.Received(), u.ReceivedAt()
	if len(at) != len(envs) || len(envs) == 0 {
		t.Fatalf("%d envelopes, %d arrival times", len(envs), len(at))
	}
	for i := 1; i < len(at); i++ {
		if at[i].Before(at[i-1]) {
			t.Fatalf("arrival times out of order: %v", at)
		}
	}

	testkit.Eventually(t, 10*time.Second, micHeard, "the agent never subscribed to the microphone")
	tone := make([]int16, 16000) // one second, 440 Hz
	for i := range tone {
		tone[i] = int16(8000 * math.Sin(2*math.Pi*440*float64(i)/16000))
	}
	start := time.Now()
	if d := u.Say(tone); d != time.Second {
		t.Fatalf("Say: %v, want 1s", d)
	}
	queued := time.Since(start)
	u.WaitSent()
	sent := time.Since(start)
	t.Logf("Say returned after %v, WaitSent after %v", queued, sent)
	if sent < 900*time.Millisecond || sent > 10*time.Second {
		t.Fatalf("WaitSent returned %v after a second of audio was queued", sent)
	}
	again := time.Now()
	u.WaitSent()
	if d := time.Since(again); d > 100*time.Millisecond {
		t.Fatalf("WaitSent with nothing queued took %v", d)
	}

	next := voiceclient.Join(t, lk.URL, lk.Token(t, room, "alice-2"), false)
	next.ContinueStanzas(u)
	next.Send(&protocol.UserMessage{ID: protocol.NewID("am"), ConversationID: cid, Content: "again"}, cid)
	if e := next.WaitFor(10*time.Second, "no echo", func(e protocol.Envelope) bool { return e.Type == protocol.TypeUserMessage }); e.StanzaID != 3 {
		t.Fatalf("stanza %d after ContinueStanzas, want 3", e.StanzaID)
	}
}
