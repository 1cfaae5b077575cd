package engines

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

func TestParseEspeakVoices(t *testing.T) {
	out := "Pty Language       Age/Gender VoiceName          File                 Other Languages\n" +
		" 5  af              --/M      Afrikaans          gmw/af\n" +
		" 2  en-us           --/M      English_(America)  gmw/en-US            (en 3)\n" +
		" 5  en-gb-x-rp      --/M      English_(Received_Pronunciation) gmw/en-GB-x-rp  (en 4)\n" +
		" 5  pt-br           --/M      Portuguese_(Brazil) roa/pt-BR           (pt 6)\n"
	got := ParseEspeakVoices(out)
	want := []Voice{{"af", "Afrikaans", "af"}, {"en-us", "English (America)", "en-US"},
		{"en-gb-x-rp", "English (Received Pronunciation)", "en-GB-x-rp"}, {"pt-br", "Portuguese (Brazil)", "pt-BR"}}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("voice %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestParseServerVoices(t *testing.T) {
	for name, body := range map[string]string{
		"speaches": `[{"voice_id":"af_sarah","model_id":"kokoro"},{"voice_id":"bf_emma","language":"en-GB"}]`,
		"wrapped":  `{"voices":["af_sarah",{"id":"bf_emma","language":"en-GB"}]}`,
	} {
		got, err := parseServerVoices([]byte(body))
		if err != nil || len(got) != 2 || got[0].ID != "af_sarah" || got[1] != (Voice{ID: "bf_emma", Language: "en-GB"}) {
			t.Errorf("%s: %+v, %v", name, got, err)
		}
	}
	if _, err := parseServerVoices([]byte(`"no"`)); err == nil {
		t.Error("a string is not a list of voices")
	}
}

// TestVoices asks the fake speech server (as speaches) and espeak-ng.
func TestVoices(t *testing.T) {
	fake := fakeopenai.New(t)
	vs, err := Voices(context.Background(), nil, Engine{URL: fake.URL(), Model: "kokoro"}, 5*time.Second)
	if err != nil || len(vs) != len(fakeopenai.DefaultVoices) || vs[0].ID != "af_sarah" || vs[0].Language != "en-US" {
		t.Fatalf("server: %+v, %v", vs, err)
	}
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		testkit.Missing(t, "espeak-ng is not installed: %v", err)
	}
	vs, err = Voices(context.Background(), nil, Engine{Kind: Espeak}, 5*time.Second)
	if err != nil || len(vs) < 10 {
		t.Fatalf("espeak-ng: %d voices, %v", len(vs), err)
	}
}
