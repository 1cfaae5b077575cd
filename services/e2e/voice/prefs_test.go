package voice_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/voiceclient"
)

// TestConversationVoiceAndLanguage (issue 30, item 2) with the real stack:
// alice's defaults (PUT /v1/settings: a voice, a rate, a language) reach
// the speech requests of her conversation's answer (voice, speed) and the
// transcription requests of her utterance (language); the conversation's
// own preferences, set during the call (PUT
// /v1/conversations/{id}/preferences), apply from the next utterance and
// answer.
func TestConversationVoiceAndLanguage(t *testing.T) {
	s := newStack(t, options{})
	// The second question shares no word with the answer, so said soon
	// after it, it is not taken for its echo.
	questions := []string{"What is the weather like in Paris tomorrow?", "Thanks, and what should I wear?"}
	var mu sync.Mutex
	saying := questions[0]
	s.speech.SetTranscriber(func(fakeopenai.TranscriptionRequest) fakeopenai.Transcript {
		mu.Lock()
		defer mu.Unlock()
		return fakeopenai.Transcript{Text: saying}
	})
	s.put("/v1/settings", map[string]any{"voice": "am_adam", "speechSpeed": 0.8, "language": "fr"})

	cid := s.conversation()
	u := voiceclient.Join(t, s.lk.URL, s.token(cid), true)
	u.Configure(voiceConfig(cid), cid)

	// turn says the question and returns the transcription and speech
	// requests it made, once its answer's last sentence was synthesised.
	turn := func(n int) ([]fakeopenai.TranscriptionRequest, []fakeopenai.SpeechRequest) {
		t.Helper()
		trFrom, spFrom := len(s.speech.TranscriptionRequests()), len(s.speech.SpeechRequests())
		mu.Lock()
		saying = questions[n-1]
		mu.Unlock()
		u.Say(voiceclient.Speech(t, questions[n-1]))
		defer func() {
			if t.Failed() {
				t.Logf("transcriptions %d, speech %d", len(s.speech.TranscriptionRequests())-trFrom, len(s.speech.SpeechRequests())-spFrom)
				rec := u.Received()
				for _, e := range rec[max(0, len(rec)-15):] {
					raw, _ := json.Marshal(e.Body)
					t.Logf("%s %.200s", e.Type, raw)
				}
			}
		}()
		testkit.Eventually(t, 40*time.Second, func() bool {
			for _, r := range s.speech.SpeechRequests()[spFrom:] {
				if r.Input == "Enjoy your day!" {
					return true
				}
			}
			return false
		}, "answer %d spoken", n)
		return s.speech.TranscriptionRequests()[trFrom:], s.speech.SpeechRequests()[spFrom:]
	}
	check := func(n int, lang, voice string, speed float64) {
		t.Helper()
		trs, sps := turn(n)
		if len(trs) == 0 || len(sps) < 3 {
			t.Fatalf("turn %d: %d transcription and %d speech requests", n, len(trs), len(sps))
		}
		for _, r := range trs {
			if r.Language != lang {
				t.Errorf("turn %d: a transcription request in %q, want %q", n, r.Language, lang)
			}
		}
		for _, r := range sps {
			if r.Voice != voice || r.Speed != speed {
				t.Errorf("turn %d: %q spoken by %s at %v, want %s at %v", n, r.Input, r.Voice, r.Speed, voice, speed)
			}
		}
	}
	// The person's defaults: the conversation sets none.
	check(1, "fr", "am_adam", 0.8)

	// The conversation's own, set during the call.
	var eff struct {
		Voice, VoiceFrom, Language string
		SpeechSpeed                float64
	}
	s.put("/v1/conversations/"+cid+"/preferences", map[string]any{"voice": "bm_george", "speechSpeed": 1.25, "language": "de-AT"}, &eff)
	if eff.Voice != "bm_george" || eff.VoiceFrom != "conversation" || eff.Language != "de-AT" || eff.SpeechSpeed != 1.25 {
		t.Fatalf("effective preferences %+v", eff)
	}
	check(2, "de", "bm_george", 1.25)
}

// put sends body to the gateway as alice and decodes the answer into out.
func (s *stack) put(path string, body any, out ...any) {
	s.t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		s.t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPut, s.base+path, bytes.NewReader(raw))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+aliceKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var msg bytes.Buffer
	_, _ = msg.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusOK {
		s.t.Fatalf("PUT %s: %d %s", path, resp.StatusCode, msg.String())
	}
	for _, o := range out {
		if err := json.Unmarshal(msg.Bytes(), o); err != nil {
			s.t.Fatal(err)
		}
	}
}
