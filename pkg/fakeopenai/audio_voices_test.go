package fakeopenai_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
)

// TestSpeechVoices: GET /v1/audio/speech/voices lists the voices as
// speaches does, and with RejectUnknownVoices a speech request naming
// another voice is refused (400) while a listed one is spoken.
func TestSpeechVoices(t *testing.T) {
	s := fakeopenai.New(t)
	res, err := http.Get(s.URL() + "/audio/speech/voices")
	if err != nil {
		t.Fatal(err)
	}
	var got []fakeopenai.Voice
	if err := json.NewDecoder(res.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if len(got) != len(fakeopenai.DefaultVoices) || got[0].ID != "af_sarah" || got[4].Language != "fr-FR" {
		t.Fatalf("voices %+v", got)
	}

	s.SetSpeech(fakeopenai.SpeechConfig{RejectUnknownVoices: true, Voices: []fakeopenai.Voice{{ID: "only"}}})
	for voice, want := range map[string]int{"only": http.StatusOK, "af_sarah": http.StatusBadRequest} {
		body, _ := json.Marshal(map[string]any{"model": "kokoro", "input": "Hi.", "voice": voice, "response_format": "pcm"})
		resp, err := http.Post(s.URL()+"/audio/speech", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("voice %s: status %d, want %d", voice, resp.StatusCode, want)
		}
	}
}
