package wake_test

import (
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/pkg/wake"
)

func TestAddressed(t *testing.T) {
	d := wake.New(nil)
	cases := []struct{ text, request, heard string }{
		{"Alicia, what time is it?", "What time is it?", "Alicia"},
		{"Alicia what time is it", "What time is it", "Alicia"},
		{"alicia. set a timer for ten minutes.", "Set a timer for ten minutes.", "alicia"},
		{"Hey Alicia, turn off the lights.", "Turn off the lights.", "Alicia"},
		{"OK, Alicia: what's the weather?", "What's the weather?", "Alicia"},
		{"Okay Alicia, stop.", "Stop.", "Alicia"},
		{"Um, hey Alicia, are you there?", "Are you there?", "Alicia"},
		{" Alisha, tell me a joke.", "Tell me a joke.", "Alisha"},
		{"Alecia, how are you?", "How are you?", "Alecia"},
		{"Elicia, what's two plus two?", "What's two plus two?", "Elicia"},
		{"Aleesha, call Anna.", "Call Anna.", "Aleesha"},
		{"A Leesha, call Anna.", "Call Anna.", "A Leesha"},
		{"Alysha, play some music.", "Play some music.", "Alysha"},
		{"Elisha, what's on my calendar?", "What's on my calendar?", "Elisha"},
		{"Alícia, bom dia.", "Bom dia.", "Alícia"},
		{"Alicia!", "", "Alicia"},
	}
	for _, c := range cases {
		t.Run(c.text, func(t *testing.T) {
			r := d.Detect(c.text)
			if !r.Addressed {
				t.Fatalf("Detect(%q) not addressed; want addressed", c.text)
			}
			if r.Request != c.request || r.Heard != c.heard {
				t.Errorf("Detect(%q) = request %q heard %q; want %q, %q", c.text, r.Request, r.Heard, c.request, c.heard)
			}
		})
	}
}

func TestNotAddressed(t *testing.T) {
	d := wake.New(nil)
	for _, text := range []string{
		"Alice said she would come tomorrow.",
		"A delicious cake is on the table.",
		"Militia groups gathered outside.",
		"Delicious, thank you.",
		"Felicia is my sister.",
		"Also, what time is it?",
		"Alaska is very cold.",
		"Allison, come here.",
		"A lot of people were there.",
		"A little bit louder, please.",
		"I told Alicia about it.",
		"What time is it?",
		"Hey, what's up?",
		"Ali, pass the salt.",
		"Leesha, what day is it?", // the name's first sound lost: missed
		"Lassie came home.",
		"Hi, Alice, I say.",
		"Aliens are not real.",
		"Asia is big.",
		"",
		"   ",
	} {
		t.Run(text, func(t *testing.T) {
			if r := d.Detect(text); r.Addressed {
				t.Errorf("Detect(%q) addressed (heard %q); want not addressed", text, r.Heard)
			}
		})
	}
}

func TestConfiguredWords(t *testing.T) {
	d := wake.New([]string{" Computer ", "hey Jarvis", ""})
	if got := d.Words(); len(got) != 2 || got[0] != "computer" || got[1] != "heyjarvis" {
		t.Fatalf("Words() = %q", got)
	}
	for text, want := range map[string]bool{
		"Computer, lights on.":   true,
		"Hey Jarvis, lights on.": true,
		"Alicia, lights on.":     false, // not one of the words
		"Compute the sum.":       false,
	} {
		if r := d.Detect(text); r.Addressed != want {
			t.Errorf("Detect(%q).Addressed = %v; want %v", text, r.Addressed, want)
		}
	}
	if got := wake.New([]string{"", " "}).Words(); len(got) != 1 || got[0] != "alicia" {
		t.Errorf("no words: Words() = %q; want the default", got)
	}
}

func TestParseWords(t *testing.T) {
	for in, want := range map[string]string{
		"":                         "alicia",
		" , ":                      "alicia",
		"Alicia":                   "alicia",
		"alicia, Hey  Computer ,,": "alicia|hey computer",
	} {
		if got := strings.Join(wake.ParseWords(in), "|"); got != want {
			t.Errorf("ParseWords(%q) = %q; want %q", in, got, want)
		}
	}
}
