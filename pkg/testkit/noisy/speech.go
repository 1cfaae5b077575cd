package noisy

import (
	"fmt"
	"testing"
)

// DefaultVoice is the espeak-ng voice the voice tests speak with.
const DefaultVoice = "en-us"

// Speech is text spoken by espeak-ng with voice (an espeak-ng -v value such
// as "en-us", "en-gb+f3"; "" is DefaultVoice) at Rate, without the silence
// espeak-ng puts before and after it: its first and last samples are
// speech. The test is skipped (fails under CI=true) without espeak-ng.
func Speech(t testing.TB, text, voice string) []int16 {
	t.Helper()
	if voice == "" {
		voice = DefaultVoice
	}
	tools, ok := requireTools(t, "espeak-ng")
	if !ok {
		return nil
	}
	pcm, err := cached(tools, fmt.Sprintf("speech|%s|%q", voice, text), func() ([]int16, error) {
		pcm, err := tools.espeak(voice, 0, 0, text)
		if err != nil {
			return nil, err
		}
		first, last := Active(pcm)
		return pcm[first:last], nil
	})
	if err != nil {
		t.Fatalf("noisy: speaking %q with voice %s: %v", text, voice, err)
		return nil
	}
	return pcm
}

// activeFloor is the magnitude below which a sample is silence for Active
// (-50 dBFS): espeak-ng's silence is 0, its quietest phonemes far above.
const activeFloor = 100

// Active returns where the sound in pcm starts and ends: the index of the
// first sample at or above -50 dBFS in magnitude and one past the last
// (0, 0 for silence).
func Active(pcm []int16) (first, end int) {
	loud := func(v int16) bool { return v >= activeFloor || v <= -activeFloor }
	first = -1
	for i, v := range pcm {
		if loud(v) {
			first = i
			break
		}
	}
	if first < 0 {
		return 0, 0
	}
	end = len(pcm)
	for end > first && !loud(pcm[end-1]) {
		end--
	}
	return first, end
}

// Utterances are the requests the voice tests speak: the complete turns of
// the end-of-turn benchmark (services/room-agent/internal/vad/testdata/
// turns.txt), the e2e voice tests' questions and interruptions, and a few
// more everyday requests. A fresh slice each call.
func Utterances() []string {
	return []string{
		"What's the weather like in Paris tomorrow?",
		"Set a timer for ten minutes.",
		"Turn off the lights in the kitchen.",
		"How far is the moon from the earth?",
		"Remind me to call my mother at six.",
		"What time is it in Tokyo right now?",
		"Play something relaxing.",
		"Can you read me my last message?",
		"Who wrote the Lord of the Rings?",
		"Add milk to the shopping list.",
		"How do I boil an egg?",
		"Thank you, that's all for now.",
		"Is it going to rain this afternoon?",
		"Translate good morning into Spanish.",
		"Tell me about the weather in Paris.",
		"Wait, what about Sunday?",
		"But what about the weekend?",
		"Actually, stop there.",
		"Wait, stop, that is enough.",
		"What will the weather be like tomorrow?",
		"Wake me up at seven tomorrow.",
		"How many grams are in a pound?",
	}
}

// Backchannels are what a listener says to show they follow, not to take
// the turn (issue 28): each one its own item, as espeak-ng is given it.
func Backchannels() []string {
	return []string{"Mm-hmm.", "Yeah.", "Right.", "Okay.", "Uh-huh."}
}
