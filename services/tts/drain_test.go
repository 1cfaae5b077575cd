package tts_test

import (
	"context"
	"net/http"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/svcmain/svcmaintest"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// TestDrainFinishesTheSentenceThenHandsTheTurnBack sends SIGTERM to the
// tts binary while its (fake, slow) backend synthesises a turn's first
// sentence: /healthz reports draining, the sentence is spoken whole and
// stored, the turn is handed back before its second sentence, and the
// process exits 0. Another replica resumes the turn after the stored
// sentence and speaks a turn published after the signal; every sentence is
// synthesised once.
func TestDrainFinishesTheSentenceThenHandsTheTurnBack(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and signals a process; skipped with -short")
	}
	h := newHarness(t, nil)
	h.stopFirst()
	slow := fakeopenai.New(t)
	// 40 characters: 2.4 s of audio in 24 chunks, one every 100 ms.
	slow.SetSpeechFault(fakeopenai.Fault{ChunkDelay: 100 * time.Millisecond})
	first := "The sentence being spoken at the signal."
	addr := testkit.FreeAddr(t)
	bin := svcmaintest.Build(t, "./cmd/tts")
	p := svcmaintest.Start(t, bin, "ALICIA_NATS_URL="+h.srv.ClientURL(), "ALICIA_TTS_URL="+slow.URL(),
		"ALICIA_TTS_METRICS_ADDR="+addr, "ALICIA_TTS_CONSUMER="+h.cfg.Consumer, "ALICIA_TTS_MAX_AHEAD=100",
		"ALICIA_SHUTDOWN_TIMEOUT=40s", "ALICIA_LOG_LEVEL=warn")
	testkit.EventuallyNoError(t, 30*time.Second, testkit.Answers("http://"+addr+"/healthz", http.StatusOK, "ok"), "tts ready")

	cid, turn := "ac_drain", "am_drain"
	h.startAnswer(cid, turn, protocol.Ptr(protocol.StartAnswerAnswerTypeVoice))
	h.sentence(context.Background(), cid, turn, 1, first, false)
	h.sentence(context.Background(), cid, turn, 2, texts[1], false)
	testkit.Eventually(t, 30*time.Second, func() bool { return len(h.audioOf(turn)) >= 2 }, "sentence 1 streaming")

	p.Signal(syscall.SIGTERM)
	testkit.EventuallyNoError(t, 30*time.Second, testkit.Answers("http://"+addr+"/healthz", http.StatusServiceUnavailable, "draining"),
		"/healthz does not report draining")
	h.speak("ac_later", "am_later", "Published after the signal.")

	if code := p.Wait(90 * time.Second); code != 0 {
		t.Fatalf("tts exited %d after SIGTERM, want 0", code)
	}
	if n := len(sentences(t, h.audioOf(turn))[1]); n != 2*samplesFor(first) {
		t.Fatalf("sentence 1: %d bytes spoken by the draining replica, want all %d", n, 2*samplesFor(first))
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return len(h.storedOf(turn)) == 1 }, "sentence 1 stored")
	var inputs []string
	for _, r := range slow.SpeechRequests() {
		inputs = append(inputs, r.Input)
	}
	if !slices.Equal(inputs, []string{first}) {
		t.Fatalf("the draining replica synthesised %q, want only the sentence it was speaking", inputs)
	}

	h.startReplica(h.cfg)
	h.sentence(context.Background(), cid, turn, 3, texts[2], true)
	got := sentences(t, h.waitSpoken(turn, 30*time.Second))
	h.waitSpoken("am_later", 30*time.Second)
	if len(got[1]) != 2*samplesFor(first) || len(got[2]) != 2*samplesFor(texts[1]) || len(got[3]) != 2*samplesFor(texts[2]) {
		t.Fatalf("sentence bytes %d, %d, %d", len(got[1]), len(got[2]), len(got[3]))
	}
	inputs = inputs[:0]
	for _, r := range h.fake.SpeechRequests() {
		inputs = append(inputs, r.Input)
	}
	slices.Sort(inputs)
	want := []string{"Published after the signal.", texts[1], texts[2]}
	slices.Sort(want)
	if !slices.Equal(inputs, want) {
		t.Fatalf("the other replica synthesised %q, want %q once each", inputs, want)
	}
	if n := len(h.storedOf(turn)); n != 3 {
		t.Fatalf("%d SentenceAudio of the handed-back turn, want 3", n)
	}
}
