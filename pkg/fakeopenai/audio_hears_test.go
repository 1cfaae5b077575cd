package fakeopenai_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/sashabaranov/go-openai"

	"github.com/alicia-voice/alicia/pkg/audio"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// The fake hears its own speech come back (an answer through a person's
// speakers, attenuated, in part) as the words of that part, as Whisper
// would; other speech goes to the next transcriber.
func TestHearsItsOwnSpeech(t *testing.T) {
	s := fakeopenai.New(t)
	texts := []string{
		"The weather in Paris is mild this week, with sunshine most mornings.",
		"Expect some rain on Sunday afternoon, so take an umbrella if you go out.",
	}
	spoken := map[string][]int16{}
	rs, err := audio.NewResampler(24000, 16000)
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range texts {
		raw, err := client(s, "").CreateSpeech(t.Context(), speechOf(text, openai.SpeechResponseFormatPcm))
		if err != nil {
			t.Fatal(err)
		}
		spoken[text] = rs.Process(nil, audio.Samples(readAll(t, raw)))
	}
	hears := s.HearsItsOwnSpeech(func(fakeopenai.TranscriptionRequest) fakeopenai.Transcript {
		return fakeopenai.Transcript{Text: "something else"}
	})
	echo := func(pcm []int16, from, to float64) []int16 {
		part := append([]int16(nil), pcm[int(from*float64(len(pcm))):int(to*float64(len(pcm)))]...)
		for i := range part {
			part[i] = int16(float64(part[i]) * 0.3) // about 10 dB quieter
		}
		return part
	}
	for _, c := range []struct {
		name    string
		samples []int16
		want    []string // words the transcript has
		not     []string // and has not
	}{
		{"the first's middle", echo(spoken[texts[0]], 0.3, 0.7), []string{"mild", "week,"}, []string{"Expect", "umbrella"}},
		{"the second's start", echo(spoken[texts[1]], 0, 0.4), []string{"Expect", "rain"}, []string{"Paris", "umbrella"}},
		{"the second's end", echo(spoken[texts[1]], 0.6, 1), []string{"umbrella"}, []string{"Expect", "Paris"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := hears(fakeopenai.TranscriptionRequest{Samples: c.samples, SampleRate: 16000, LevelDBFS: audio.DBFS(c.samples)}).Text
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("heard %q: no %q", got, w)
				}
			}
			for _, w := range c.not {
				if strings.Contains(got, w) {
					t.Errorf("heard %q: %q was not in the audio", got, w)
				}
			}
		})
	}
	// As short as the VAD's minimum speech (160 ms): a word or two of the
	// answer, not necessarily the right ones (its level alone is ambiguous
	// over so short a stretch).
	short := echo(spoken[texts[0]], 0.48, 0.52)
	if got := hears(fakeopenai.TranscriptionRequest{Samples: short, SampleRate: 16000, LevelDBFS: audio.DBFS(short)}).Text; got == "something else" || !strings.Contains(texts[0], got) {
		t.Fatalf("a short piece of the answer heard as %q", got)
	}
	// A person's speech (espeak-ng) is not the fake's own.
	out, err := exec.Command("espeak-ng", "--stdout", "-v", "en-us", "Tell me about the weather in Paris this week.").Output()
	if err != nil {
		testkit.Missing(t, "espeak-ng: %v", err)
	}
	w, err := audio.ParseWAV(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := hears(fakeopenai.TranscriptionRequest{Samples: w.Mono(), SampleRate: w.SampleRate, LevelDBFS: audio.DBFS(w.Mono())}).Text; got != "something else" {
		t.Fatalf("a person's speech heard as the fake's own: %q", got)
	}
}
