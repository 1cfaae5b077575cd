// Package voiceclient is a Go LiveKit client in the role of the person, for
// end-to-end tests: it joins a conversation's room with a token from the
// gateway, talks on a PCM microphone track, sends and receives envelopes on
// the data channel, and records the agent's audio.
//
//	u := voiceclient.Join(t, lk.URL, token, true)
//	u.Configure(cfg, cid)
//	u.Say(voiceclient.Speech(t, "What is the weather like in Paris tomorrow?"))
//	u.WaitFor(20*time.Second, "no StartAnswer", func(e protocol.Envelope) bool { return e.Type == protocol.TypeStartAnswer })
package voiceclient

import (
	"errors"
	"math"
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

// AgentIdentity is the room-agent's participant identity.
const AgentIdentity = "alicia-agent"

// Heard is agent audio the user received, with when each piece arrived.
type Heard struct {
	At  time.Time
	PCM []int16 // 48 kHz mono
}

// User is a Go LiveKit client in the role of the person: it talks on a
// PCM microphone track, sends and receives envelopes on the data channel,
// and records the agent's audio.
type User struct {
	Room *lksdk.Room
	Mic  *lkmedia.PCMLocalTrack // nil without voice

	t testing.TB

	mu      sync.Mutex
	envs    []protocol.Envelope
	envAt   []time.Time // when each of envs arrived
	audio   []Heard
	stanza  int32
	remotes []*lkmedia.PCMRemoteTrack
	// echo, when set, sends what is heard back into the microphone (Echo).
	echo *echoPath
}

// echoPath is the way the agent's audio comes back through the
// microphone: delay later, gain quieter.
type echoPath struct {
	delay time.Duration
	gain  float64
	rs    *audio.Resampler
	out   chan echoChunk
}

type echoChunk struct {
	due time.Time
	pcm []int16
}

type heardWriter struct{ u *User }

func (w heardWriter) WriteSample(s media.PCM16Sample) error {
	now := time.Now()
	w.u.mu.Lock()
	w.u.audio = append(w.u.audio, Heard{At: now, PCM: append([]int16(nil), s...)})
	e := w.u.echo
	var back []int16
	if e != nil {
		back = e.rs.Process(nil, s)
		for i, v := range back {
			back[i] = int16(float64(v) * e.gain)
		}
	}
	w.u.mu.Unlock()
	if e != nil && len(back) > 0 {
		select {
		case e.out <- echoChunk{due: now.Add(e.delay), pcm: back}:
		default: // the microphone is far behind: drop rather than block the decoder
		}
	}
	return nil
}

// Echo makes the microphone pick up the agent's audio from now on, as
// speakers without echo cancellation do: delay after it is heard and
// lossDB quieter. What Say queues meanwhile goes out between the echo's
// pieces, not mixed with them: use it for echo alone.
func (u *User) Echo(delay time.Duration, lossDB float64) {
	u.t.Helper()
	rs, err := audio.NewResampler(48000, 16000)
	if err != nil {
		u.t.Fatal(err)
	}
	e := &echoPath{delay: delay, gain: math.Pow(10, -lossDB/20), rs: rs, out: make(chan echoChunk, 4096)}
	u.mu.Lock()
	u.echo = e
	u.mu.Unlock()
	done := make(chan struct{})
	u.t.Cleanup(func() { close(done) })
	go func() {
		for {
			select {
			case <-done:
				return
			case c := <-e.out:
				select {
				case <-done:
					return
				case <-time.After(time.Until(c.due)):
				}
				if err := u.Mic.WriteSample(c.pcm); err != nil {
					return
				}
			}
		}
	}()
}
func (heardWriter) Close() error { return nil }

// Join connects with a token from the gateway; voice adds a microphone and
// subscribes to the agent's audio. It returns once the agent is in the room;
// the test's cleanup disconnects.
func Join(t testing.TB, url, token string, voice bool) *User {
	t.Helper()
	u := &User{t: t}
	cb := lksdk.NewRoomCallback()
	cb.OnDataPacket = func(p lksdk.DataPacket, params lksdk.DataReceiveParams) {
		d, ok := p.(*lksdk.UserDataPacket)
		if !ok || params.SenderIdentity != AgentIdentity {
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
		if rp.Identity() != AgentIdentity || track.Kind() != webrtc.RTPCodecTypeAudio {
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
	u.Room = room
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
		u.Mic = mic
		t.Cleanup(func() { _ = mic.Close() })
	}
	testkit.Eventually(t, 20*time.Second, func() bool { return room.GetParticipantByIdentity(AgentIdentity) != nil },
		"the agent never joined the room")
	return u
}

// SendEnvelope puts env on the data channel as it is.
func (u *User) SendEnvelope(env protocol.Envelope) {
	u.t.Helper()
	frame, err := protocol.Encode(env)
	if err != nil {
		u.t.Fatal(err)
	}
	if err := u.Room.LocalParticipant.PublishDataPacket(lksdk.UserData(frame), lksdk.WithDataPublishReliable(true),
		lksdk.WithDataPublishDestination([]string{AgentIdentity})); err != nil {
		u.t.Fatalf("send %s: %v", env.Type, err)
	}
}

// Send puts a client envelope on the data channel with the next stanza id.
func (u *User) Send(body protocol.Body, cid string) {
	u.t.Helper()
	u.mu.Lock()
	u.stanza++
	env := protocol.Envelope{StanzaID: u.stanza, ConversationID: cid, Type: body.MessageType(), Body: body}
	u.mu.Unlock()
	u.SendEnvelope(env)
}

// ContinueStanzas makes u's next stanza ids follow prev's, as a client's
// go on across visits (a page reloaded, the room joined again).
func (u *User) ContinueStanzas(prev *User) {
	prev.mu.Lock()
	n := prev.stanza
	prev.mu.Unlock()
	u.mu.Lock()
	u.stanza = n
	u.mu.Unlock()
}

var errNotYet = errors.New("not yet")

// Configure sends cfg with the next stanza id and sends it again until an
// answer comes after it: a data packet to the agent is dropped while its
// data channel is still opening (and a new agent joins after a dead one's
// lease), and the edge ignores a resent Configuration.
func (u *User) Configure(cfg *protocol.Configuration, cid string) {
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
		u.SendEnvelope(env)
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

// Say queues 16 kHz speech on the microphone and returns its duration at
// once: the track sends it paced in real time (20 ms frames), then silence.
func (u *User) Say(pcm16k []int16) time.Duration {
	u.t.Helper()
	for off := 0; off < len(pcm16k); off += 320 {
		if err := u.Mic.WriteSample(pcm16k[off:min(off+320, len(pcm16k))]); err != nil {
			u.t.Fatal(err)
		}
	}
	return audio.FramesDuration(len(pcm16k), 16000)
}

// WaitSent returns once the microphone track has taken every sample given to
// Say so far from its queue into the frames it sends (PCMLocalTrack's
// WaitForPlayout: the last frame is encoded and written to the track right
// after). It returns at once when nothing is queued.
func (u *User) WaitSent() {
	u.Mic.WaitForPlayout()
}

// Received is every envelope the agent sent so far, in arrival order.
func (u *User) Received() []protocol.Envelope {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]protocol.Envelope(nil), u.envs...)
}

// ReceivedAt is when each envelope of Received arrived (same indexes).
func (u *User) ReceivedAt() []time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]time.Time(nil), u.envAt...)
}

// Heard is the agent audio received so far.
func (u *User) Heard() []Heard {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]Heard(nil), u.audio...)
}

// WaitFor returns the first received envelope that matches; the test fails
// with what when none has come within timeout.
func (u *User) WaitFor(timeout time.Duration, what string, match func(protocol.Envelope) bool) protocol.Envelope {
	u.t.Helper()
	var got protocol.Envelope
	testkit.Eventually(u.t, timeout, func() bool {
		for _, e := range u.Received() {
			if match(e) {
				got = e
				return true
			}
		}
		return false
	}, what)
	return got
}

// Speech synthesises text with espeak-ng as 16 kHz PCM.
func Speech(t testing.TB, text string) []int16 {
	t.Helper()
	return SpeechAt(t, text, 16000)
}

// SpeechAt is text spoken by espeak-ng at rate (Hz).
func SpeechAt(t testing.TB, text string, rate int) []int16 {
	t.Helper()
	out, err := exec.Command("espeak-ng", "--stdout", "-v", "en-us", text).Output()
	if err != nil {
		t.Fatalf("espeak-ng (CI installs it): %v", err)
	}
	w, err := audio.ParseWAV(out)
	if err != nil {
		t.Fatal(err)
	}
	pcm, err := audio.Resample(w.Mono(), w.SampleRate, rate)
	if err != nil {
		t.Fatal(err)
	}
	return pcm
}

// Loud counts the 20 ms pieces of heard audio above -45 dBFS that arrived
// at or after from, with when the first and the last of them arrived.
func Loud(h []Heard, from time.Time) (n int, first, last time.Time) {
	for _, x := range h {
		if x.At.Before(from) || audio.DBFS(x.PCM) < -45 {
			continue
		}
		if n == 0 {
			first = x.At
		}
		n++
		last = x.At
	}
	return n, first, last
}
