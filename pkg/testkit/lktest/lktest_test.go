package lktest_test

import (
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livekit/protocol/logger"
	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/lktest"
	"github.com/alicia-voice/alicia/pkg/testkit/netns"
)

func TestMain(m *testing.M) {
	lksdk.SetLogger(logger.GetDiscardLogger()) // pion's debug lines; the server's output is logged on failure
	netns.Main(m)
}

// inbox records the data packets a client receives.
type inbox struct {
	mu   sync.Mutex
	got  []string
	from []string
}

func (b *inbox) callback() *lksdk.RoomCallback {
	cb := lksdk.NewRoomCallback()
	cb.OnDataPacket = func(data lksdk.DataPacket, params lksdk.DataReceiveParams) {
		if p, ok := data.(*lksdk.UserDataPacket); ok {
			b.mu.Lock()
			b.got = append(b.got, p.Topic+":"+string(p.Payload))
			b.from = append(b.from, params.SenderIdentity)
			b.mu.Unlock()
		}
	}
	return cb
}

func (b *inbox) snapshot() ([]string, []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.got...), append([]string(nil), b.from...)
}

// TestTwoClientsExchangeData: two server-sdk-go clients join the same room
// on a real livekit-server in the namespace, and each receives the other's
// reliable data packet over WebRTC (data channels through the SFU).
func TestTwoClientsExchangeData(t *testing.T) {
	lk := lktest.Start(t)
	if !strings.HasPrefix(lk.URL, "ws://"+netns.IP()+":") {
		t.Fatalf("URL %s, want the namespace address %s", lk.URL, netns.IP())
	}
	const room = "conv_ac_lktest"
	var aliceIn, bobIn inbox
	start := time.Now()
	alice, err := lksdk.ConnectToRoomWithToken(lk.URL, lk.Token(t, room, "alice"), aliceIn.callback(), lksdk.WithAutoSubscribe(false))
	if err != nil {
		t.Fatalf("alice joins: %v", err)
	}
	defer alice.Disconnect()
	bob, err := lksdk.ConnectToRoomWithToken(lk.URL, lk.Token(t, room, "bob"), bobIn.callback(), lksdk.WithAutoSubscribe(false))
	if err != nil {
		t.Fatalf("bob joins: %v", err)
	}
	defer bob.Disconnect()
	t.Logf("both joined in %s", time.Since(start).Round(time.Millisecond))
	if alice.Name() != room || bob.Name() != room {
		t.Fatalf("rooms %q and %q, want %q", alice.Name(), bob.Name(), room)
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		return alice.GetParticipantByIdentity("bob") != nil && bob.GetParticipantByIdentity("alice") != nil
	}, "alice and bob do not see each other")

	sent := time.Now()
	if err := alice.LocalParticipant.PublishDataPacket(lksdk.UserData([]byte("hello bob")),
		lksdk.WithDataPublishReliable(true), lksdk.WithDataPublishTopic("alicia")); err != nil {
		t.Fatal(err)
	}
	if err := bob.LocalParticipant.PublishDataPacket(lksdk.UserData([]byte("hello alice")),
		lksdk.WithDataPublishReliable(true), lksdk.WithDataPublishTopic("alicia")); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 15*time.Second, func() bool {
		a, _ := aliceIn.snapshot()
		b, _ := bobIn.snapshot()
		return len(a) > 0 && len(b) > 0
	}, "data packets did not arrive")
	t.Logf("data delivered both ways %s after publishing", time.Since(sent).Round(time.Millisecond))
	for _, c := range []struct {
		name       string
		in         *inbox
		want, from string
	}{
		{"bob receives alice's packet", &bobIn, "alicia:hello bob", "alice"},
		{"alice receives bob's packet", &aliceIn, "alicia:hello alice", "bob"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, from := c.in.snapshot()
			if len(got) != 1 || got[0] != c.want || from[0] != c.from {
				t.Fatalf("received %q from %q, want exactly %q from %q (no echo of one's own)", got, from, c.want, c.from)
			}
		})
	}
}

// TestWrongSecretIsRefused: the server refuses a token signed by another
// secret.
func TestWrongSecretIsRefused(t *testing.T) {
	lk := lktest.Start(t)
	forged := &lktest.Server{URL: lk.URL, APIKey: lk.APIKey, APISecret: strings.Repeat("f", 40)}
	_, err := lksdk.ConnectToRoomWithToken(lk.URL, forged.Token(t, "conv_ac_x", "mallory"), lksdk.NewRoomCallback(),
		lksdk.WithConnectTimeout(5*time.Second))
	if err == nil {
		t.Fatal("joined with a token signed by the wrong secret")
	}
	// The server still answers afterwards.
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(lk.URL, "ws://"), 2*time.Second)
	if err != nil {
		t.Fatalf("the server no longer answers: %v (process: %v)", err, lk.Process.Err())
	}
	c.Close()
}
