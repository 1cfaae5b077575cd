package vad_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/services/room-agent/internal/vad"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		name, text, lang string
		want             vad.Ending
	}{
		{"empty", "", "en", vad.Unknown},
		{"spaces", "   ", "en", vad.Unknown},
		{"question", "What time is it in Tokyo?", "en", vad.Complete},
		{"command", "Turn off the lights.", "en", vad.Complete},
		{"exclamation", "That's great!", "", vad.Complete},
		{"quoted", `He said "stop."`, "en", vad.Complete},
		{"no punctuation", "turn off the lights", "en", vad.Unknown},
		{"comma", "When I get home,", "en", vad.TrailingOff},
		{"ellipsis", "I was thinking...", "en", vad.TrailingOff},
		{"unicode ellipsis", "I was thinking…", "en", vad.TrailingOff},
		{"dash", "I want the —", "en", vad.TrailingOff},
		{"and with a period", "I need milk and.", "en", vad.TrailingOff},
		{"and with a question mark", "Can you order coffee and?", "en", vad.TrailingOff},
		{"um", "Book a table for um.", "en-US", vad.TrailingOff},
		{"because", "I can't come because.", "en", vad.TrailingOff},
		{"article", "Tell me about the.", "en", vad.TrailingOff},
		{"possessive", "Send a message to my.", "en", vad.TrailingOff},
		{"preposition", "What's the best way to get to.", "en", vad.TrailingOff},
		{"preposition asked", "Where are you from?", "en", vad.Complete},
		{"two words", "It was nice, you know.", "en", vad.TrailingOff},
		{"two words asked", "Do you know?", "en", vad.Complete},
		{"curly apostrophe", "So what I’m.", "en", vad.TrailingOff},
		{"marker alone", "Actually.", "en", vad.TrailingOff},
		{"marker after a sentence", "Play some jazz. Actually.", "en", vad.TrailingOff},
		{"two markers", "So actually.", "en", vad.TrailingOff},
		{"okay is an answer", "Okay.", "en", vad.Complete},
		{"subordinate clause alone", "If it rains tomorrow.", "en", vad.TrailingOff},
		{"subordinate clause with its main one", "If it rains tomorrow, remind me to take an umbrella.", "en", vad.Complete},
		{"question opening with when", "When does the store close?", "en", vad.Complete},
		{"demonstrative", "Cancel that.", "en", vad.Complete},
		{"french", "Je voudrais un café et.", "fr", vad.TrailingOff},
		{"french complete", "Quelle heure est-il ?", "fr-FR", vad.Complete},
		{"german filler", "Ich brauche ähm.", "de", vad.TrailingOff},
		{"language named as Whisper does", "Ich brauche Milch und.", "german", vad.TrailingOff},
		{"english named as Whisper does", "Set a timer.", "english", vad.Complete},
		{"spanish", "Quiero pan y.", "es", vad.TrailingOff},
		{"unknown language, period", "Ik wil koffie.", "nl", vad.Unknown},
		{"unknown language, question", "Hoe laat is het?", "nl", vad.Complete},
		{"unknown language, comma", "Ik wil koffie,", "nl", vad.TrailingOff},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := vad.Classify(c.text, c.lang); got != c.want {
				t.Fatalf("Classify(%q, %q) = %v, want %v", c.text, c.lang, got, c.want)
			}
		})
	}
}

func TestEndOfTurnSilence(t *testing.T) {
	rule := vad.EndOfTurn{Min: 250 * time.Millisecond, Max: 900 * time.Millisecond}
	for _, c := range []struct {
		name string
		rule vad.EndOfTurn
		text string
		want time.Duration
	}{
		{"complete: min", rule, "What's the weather like?", 250 * time.Millisecond},
		{"trailing: max", rule, "I'd like the pasta and", 900 * time.Millisecond},
		{"unknown: no opinion", rule, "", 0},
		{"defaults", vad.EndOfTurn{}, "Set a timer.", 300 * time.Millisecond},
		{"default max", vad.EndOfTurn{}, "um", time.Second},
		{"off", vad.EndOfTurn{Off: true, Min: 250 * time.Millisecond}, "Set a timer.", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.rule.Silence(c.text, "en"); got != c.want {
				t.Fatalf("Silence(%q) = %v, want %v", c.text, got, c.want)
			}
		})
	}
}

func TestEndOfTurnValidate(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	for _, c := range []struct {
		name string
		rule vad.EndOfTurn
		cfg  vad.Config
		ok   bool
	}{
		{"defaults", vad.EndOfTurn{}, vad.Config{}, true},
		{"equal bounds", vad.EndOfTurn{Min: ms(500), Max: ms(500)}, vad.Config{EndSilence: ms(500)}, true},
		{"min above end silence", vad.EndOfTurn{Min: ms(600)}, vad.Config{EndSilence: ms(500)}, false},
		{"max below end silence", vad.EndOfTurn{Max: ms(400)}, vad.Config{EndSilence: ms(500)}, false},
		{"end silence above the default max", vad.EndOfTurn{}, vad.Config{EndSilence: ms(1500)}, false},
		{"min below a frame", vad.EndOfTurn{Min: ms(10)}, vad.Config{}, false},
		{"off ignores bounds", vad.EndOfTurn{Off: true, Min: ms(900), Max: ms(100)}, vad.Config{}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.rule.Validate(c.cfg); (err == nil) != c.ok {
				t.Fatalf("Validate = %v, want ok %v", err, c.ok)
			}
		})
	}
}

// TestSetEndSilence: the silence set for the open utterance ends it, while
// no speech came after the audio its transcript heard, and only it.
func TestSetEndSilence(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	r := rand.New(rand.NewPCG(5, 6))
	// Speech 1.0-2.0 s, a 600 ms pause, speech 2.6-3.6 s, room noise,
	// speech 5.6-6.6 s, room noise.
	pcm := mix(noise(time.Second, -60, r), voice(time.Second), noise(ms(600), -60, r), voice(time.Second),
		noise(2*time.Second, -60, r), voice(time.Second), noise(2*time.Second, -60, r))
	at := func(when time.Duration, silence time.Duration, heard int) func(*vad.Detector, time.Duration) {
		return func(d *vad.Detector, now time.Duration) {
			if now == when {
				d.SetEndSilence(silence, heard)
			}
		}
	}
	for _, c := range []struct {
		name string
		set  func(d *vad.Detector, now time.Duration) // before each frame in speech
		ends []time.Duration                          // when the End events come
	}{
		{"none: the fixed end silence", func(*vad.Detector, time.Duration) {}, []time.Duration{ms(2500), ms(4100), ms(7100)}},
		{"longer in the pause: one turn", at(ms(2100), ms(900), -1), []time.Duration{ms(4100), ms(7100)}},
		{"shorter at the end", at(ms(3700), ms(250), -1), []time.Duration{ms(2500), ms(3860), ms(7100)}},
		{"set late: ends at once", at(ms(3980), ms(200), -1), []time.Duration{ms(2500), ms(4000), ms(7100)}},
		{"stale: speech after the audio heard", at(ms(3700), ms(250), 1000), []time.Duration{ms(2500), ms(4100), ms(7100)}},
		{"stale in the pause: set while speaking", at(ms(1500), ms(250), -1), []time.Duration{ms(2500), ms(4100), ms(7100)}},
		{"zero restores the end silence", func(d *vad.Detector, now time.Duration) {
			at(ms(3620), ms(250), -1)(d, now)
			at(ms(3640), 0, -1)(d, now)
		}, []time.Duration{ms(2500), ms(4100), ms(7100)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := vad.New(vad.Config{EndSilence: ms(500)})
			if err != nil {
				t.Fatal(err)
			}
			var ends []time.Duration
			for off := 0; off < len(pcm); off += 320 {
				now := ms(off / 16)
				if d.InSpeech() {
					c.set(d, now)
				}
				d.Push(pcm[off:min(off+320, len(pcm))], func(ev vad.Event) {
					if ev.Kind == vad.End {
						ends = append(ends, now+20*time.Millisecond)
					}
				})
			}
			if len(ends) != len(c.ends) {
				t.Fatalf("ends at %v, want %v", ends, c.ends)
			}
			for i := range ends {
				if ends[i] < c.ends[i]-ms(40) || ends[i] > c.ends[i]+ms(40) {
					t.Fatalf("ends at %v, want %v (± 40 ms)", ends, c.ends)
				}
			}
		})
	}
}

func TestSetEndSilenceWithoutUtterance(t *testing.T) {
	d, err := vad.New(vad.Config{})
	if err != nil {
		t.Fatal(err)
	}
	d.SetEndSilence(100*time.Millisecond, -1)
	if got := d.EndSilence(); got != 500*time.Millisecond {
		t.Fatalf("EndSilence = %v after a SetEndSilence with no utterance open, want 500ms", got)
	}
}
