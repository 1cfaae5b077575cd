package voice_test

import (
	"math"
	"sort"
	"testing"
	"time"

	"github.com/livekit/media-sdk"
	lksdk "github.com/livekit/server-sdk-go/v2"
	lkmedia "github.com/livekit/server-sdk-go/v2/pkg/media"
	"github.com/pion/webrtc/v4"

	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/lktest"
	"github.com/alicia-voice/alicia/pkg/testkit/voiceclient"
)

// echo is a participant in the agent's place that plays back what it hears:
// the user's Opus track decoded to PCM and written at once to its own PCM
// track, as the room-agent's listener and player do, with nothing between.
type echo struct{ out *lkmedia.PCMLocalTrack }

func (e echo) WriteSample(s media.PCM16Sample) error { return e.out.WriteSample(s) }
func (echo) Close() error                            { return nil }

// benchAudioRoundTrip (BenchmarkVoiceToVoiceClient/floor): the floor under voice-to-voice beyond the
// silence, on the same livekit-server, client and media stack: a sound the
// user starts making → the user hears it back from a participant that
// plays back what it hears. The agent's time beyond its silence can be no
// shorter: the user's last speech must reach it (the way in) and its first
// answer frame the user (the way out).
func benchAudioRoundTrip(b *testing.B) {
	lk := lktest.Start(b)
	const room = "conv_ac_roundtrip"
	out, err := lkmedia.NewPCMLocalTrack(48000, 1, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = out.Close() })
	remotes := make(chan *lkmedia.PCMRemoteTrack, 4)
	cb := lksdk.NewRoomCallback()
	cb.OnTrackSubscribed = func(track *webrtc.TrackRemote, _ *lksdk.RemoteTrackPublication, _ *lksdk.RemoteParticipant) {
		if track.Kind() != webrtc.RTPCodecTypeAudio {
			return
		}
		rt, err := lkmedia.NewPCMRemoteTrack(track, echo{out}, lkmedia.WithTargetSampleRate(48000), lkmedia.WithTargetChannels(1))
		if err != nil {
			b.Errorf("echo: %v", err)
			return
		}
		remotes <- rt
	}
	cb.OnParticipantConnected = func(rp *lksdk.RemoteParticipant) {
		for _, pub := range rp.TrackPublications() {
			if rpub, ok := pub.(*lksdk.RemoteTrackPublication); ok {
				_ = rpub.SetSubscribed(true)
			}
		}
	}
	cb.OnTrackPublished = func(pub *lksdk.RemoteTrackPublication, _ *lksdk.RemoteParticipant) {
		if err := pub.SetSubscribed(true); err != nil {
			b.Errorf("echo: subscribe: %v", err)
		}
	}
	agent, err := lksdk.ConnectToRoomWithToken(lk.URL, lk.Token(b, room, voiceclient.AgentIdentity), cb, lksdk.WithAutoSubscribe(false))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		for len(remotes) > 0 {
			(<-remotes).Close()
		}
		agent.Disconnect()
	})
	if _, err := agent.LocalParticipant.PublishTrack(out, &lksdk.TrackPublicationOptions{Name: "echo"}); err != nil {
		b.Fatal(err)
	}
	u := voiceclient.Join(b, lk.URL, lk.Token(b, room, "user-1"), true)
	tone := make([]int16, 16000/5) // 200 ms at -12 dBFS
	for i := range tone {
		tone[i] = int16(8000 * math.Sin(2*math.Pi*440*float64(i)/16000))
	}
	quiet := make([]int16, 16000*3/10)
	// Until the echo comes back: both tracks are subscribed and flowing.
	testkit.Eventually(b, 20*time.Second, func() bool {
		u.Say(tone)
		u.WaitSent()
		time.Sleep(200 * time.Millisecond)
		n, _, _ := voiceclient.Loud(u.Heard(), time.Time{})
		return n > 0
	}, "the echo never came back")
	time.Sleep(time.Second)
	var rtt []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		u.Say(quiet) // the echo of the last tone dies away
		u.WaitSent()
		t0 := time.Now()
		u.Say(tone)
		var first time.Time
		testkit.Eventually(b, 10*time.Second, func() bool {
			var n int
			n, first, _ = voiceclient.Loud(u.Heard(), t0)
			return n > 0
		}, "no echo")
		rtt = append(rtt, first.Sub(t0))
		u.WaitSent()
		time.Sleep(300 * time.Millisecond)
	}
	b.StopTimer()
	sort.Slice(rtt, func(i, j int) bool { return rtt[i] < rtt[j] })
	b.ReportMetric(float64(rtt[len(rtt)/2].Microseconds())/1000, "round-trip-p50-ms")
	b.ReportMetric(float64(rtt[len(rtt)*99/100].Microseconds())/1000, "round-trip-p99-ms")
	b.ReportMetric(0, "ns/op")
}
