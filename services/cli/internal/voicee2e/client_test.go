package voicee2e_test

import (
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/livekit/media-sdk"
	lksdk "github.com/livekit/server-sdk-go/v2"
	lkmedia "github.com/livekit/server-sdk-go/v2/pkg/media"
	"github.com/pion/webrtc/v4"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

const agentIdentity = "alicia-agent"

// heard is agent audio the user received, with when each piece arrived.
type heard struct {
	at  time.Time
	pcm []int16 // 48 kHz mono
}

// user is a Go LiveKit client in the role of the person: it talks on a
// PCM microphone track, sends and receives envelopes on the data channel,
// and records the agent's audio.
type user struct {
	t    testing.TB
	room *lksdk.Room
	mic  *lkmedia.PCMLocalTrack

	mu      sync.Mutex
	envs    []protocol.Envelope
	envAt   []time.Time // when each of envs arrived
	audio   []heard
	stanza  int32
	remotes []*lkmedia.PCMRemoteTrack
}

type heardWriter struct{ u *user }

func (w heardWriter) WriteSample(s media.PCM16Sample) error {
	w.u.mu.Lock()
	w.u.audio = append(w.u.audio, heard{at: time.Now(), pcm: append([]int16(nil), s...)})
	w.u.mu.Unlock()
	return nil
}
func (heardWriter) Close() error { return nil }

// join connects with a token from the gateway; voice adds a microphone.
func join(t testing.TB, url, token string, voice bool) *user {
	t.Helper()
	u := &user{t: t}
	cb := lksdk.NewRoomCallback()
	cb.OnDataPacket = func(p lksdk.DataPacket, params lksdk.DataReceiveParams) {
		d, ok := p.(*lksdk.UserDataPacket)
		if !ok || params.SenderIdentity != agentIdentity {
			return
		}
		env, err := protocol.Decode(d.Payload)
		if err != nil {
			t.Errorf("agent sent an invalid envelope: %v", err)
			return
		}
		u.mu.Lock()
		u.envs = append(u.envs, env)
		u.envAt = append(u.envAt, time.Now())
		u.mu.Unlock()
	}
	cb.OnTrackSubscribed = func(track *webrtc.TrackRemote, _ *lksdk.RemoteTrackPublication, rp *lksdk.RemoteParticipant) {
		if rp.Identity() != agentIdentity || track.Kind() != webrtc.RTPCodecTypeAudio {
			return
		}
		rt, err := lkmedia.NewPCMRemoteTrack(track, heardWriter{u}, lkmedia.WithTargetSampleRate(48000), lkmedia.WithTargetChannels(1))
		if err != nil {
			t.Errorf("agent track: %v", err)
			return
		}
		u.mu.Lock()
		u.remotes = append(u.remotes, rt)
		u.mu.Unlock()
	}
	room, err := lksdk.ConnectToRoomWithToken(url, token, cb, lksdk.WithAutoSubscribe(voice))
	if err != nil {
		t.Fatalf("user join: %v", err)
	}
	u.room = room
	t.Cleanup(func() {
		u.mu.Lock()
		rs := u.remotes
		u.mu.Unlock()
		for _, r := range rs {
			r.Close()
		}
		room.Disconnect()
	})
	if voice {
		mic, err := lkmedia.NewPCMLocalTrack(16000, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := room.LocalParticipant.PublishTrack(mic, &lksdk.TrackPublicationOptions{Name: "mic", Source: 2}); err != nil {
			t.Fatalf("publish mic: %v", err)
		}
		u.mic = mic
		t.Cleanup(func() { _ = mic.Close() })
	}
	testkit.Eventually(t, 20*time.Second, func() bool { return room.GetParticipantByIdentity(agentIdentity) != nil },
		"the agent never joined the room")
	return u
}

// sendEnvelope puts env on the data channel as it is.
func (u *user) sendEnvelope(env protocol.Envelope) {
	u.t.Helper()
	frame, err := protocol.Encode(env)
	if err != nil {
		u.t.Fatal(err)
	}
	if err := u.room.LocalParticipant.PublishDataPacket(lksdk.UserData(frame), lksdk.WithDataPublishReliable(true),
		lksdk.WithDataPublishDestination([]string{agentIdentity})); err != nil {
		u.t.Fatalf("send %s: %v", env.Type, err)
	}
}

// send puts a client envelope on the data channel with the next stanza id.
func (u *user) send(body protocol.Body, cid string) {
	u.t.Helper()
	u.mu.Lock()
	u.stanza++
	env := protocol.Envelope{StanzaID: u.stanza, ConversationID: cid, Type: body.MessageType(), Body: body}
	u.mu.Unlock()
	frame, err := protocol.Encode(env)
	if err != nil {
		u.t.Fatal(err)
	}
	if err := u.room.LocalParticipant.PublishDataPacket(lksdk.UserData(frame), lksdk.WithDataPublishReliable(true),
		lksdk.WithDataPublishDestination([]string{agentIdentity})); err != nil {
		u.t.Fatalf("send %s: %v", env.Type, err)
	}
}

// configure sends cfg with the next stanza id and sends it again until an
// answer comes after it: a data packet to the agent is dropped while its
// data channel is still opening (and a new agent joins after a dead one's
// lease), and the edge ignores a resent Configuration.
func (u *user) configure(cfg *protocol.Configuration, cid string) {
	u.t.Helper()
	u.mu.Lock()
	u.stanza++
	env := protocol.Envelope{StanzaID: u.stanza, ConversationID: cid, Type: protocol.TypeConfiguration, Body: cfg}
	seen := len(u.envs)
	u.mu.Unlock()
	answered := func() bool {
		u.mu.Lock()
		defer u.mu.Unlock()
		for _, e := range u.envs[seen:] {
			if e.Type == protocol.TypeConfiguration {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		u.sendEnvelope(env)
		if testkit.CheckFor(500*time.Millisecond, 20*time.Millisecond, func() error {
			if answered() {
				return nil
			}
			return errNotYet
		}) == nil {
			return
		}
	}
	u.t.Fatal("no Configuration answer")
}

// say plays speech into the microphone (it is paced by the track; silence follows).
func (u *user) say(pcm16k []int16) time.Duration {
	u.t.Helper()
	for off := 0; off < len(pcm16k); off += 320 {
		if err := u.mic.WriteSample(pcm16k[off:min(off+320, len(pcm16k))]); err != nil {
			u.t.Fatal(err)
		}
	}
	return audio.FramesDuration(len(pcm16k), 16000)
}

func (u *user) received() []protocol.Envelope {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]protocol.Envelope(nil), u.envs...)
}

func (u *user) heard() []heard {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]heard(nil), u.audio...)
}

// waitFor returns the first received envelope that matches.
func (u *user) waitFor(timeout time.Duration, what string, match func(protocol.Envelope) bool) protocol.Envelope {
	u.t.Helper()
	var got protocol.Envelope
	testkit.Eventually(u.t, timeout, func() bool {
		for _, e := range u.received() {
			if match(e) {
				got = e
				return true
			}
		}
		return false
	}, what)
	return got
}

// speech synthesises text with espeak-ng as 16 kHz PCM.
func speech(t testing.TB, text string) []int16 {
	t.Helper()
	out, err := exec.Command("espeak-ng", "--stdout", "-v", "en-us", text).Output()
	if err != nil {
		t.Fatalf("espeak-ng (CI installs it): %v", err)
	}
	w, err := audio.ParseWAV(out)
	if err != nil {
		t.Fatal(err)
	}
	pcm, err := audio.Resample(w.Mono(), w.SampleRate, 16000)
	if err != nil {
		t.Fatal(err)
	}
	return pcm
}

// loudFrames counts 20 ms pieces of heard audio above -45 dBFS after from.
func loud(h []heard, from time.Time) (n int, first, last time.Time) {
	for _, x := range h {
		if x.at.Before(from) || audio.DBFS(x.pcm) < -45 {
			continue
		}
		if n == 0 {
			first = x.at
		}
		n++
		last = x.at
	}
	return n, first, last
}
