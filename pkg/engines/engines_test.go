package engines_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/engines"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

func TestName(t *testing.T) {
	for _, c := range []struct {
		name string
		e    engines.Engine
		want string
	}{
		{"model", engines.Engine{Kind: engines.OpenAI, Model: "whisper-large-v3"}, "whisper-large-v3"},
		{"kind left empty", engines.Engine{Model: "fake-chat"}, "fake-chat"},
		{"speech server", engines.Engine{Kind: engines.OpenAI, Model: "kokoro", Voice: "af_sarah"}, "kokoro (voice af_sarah)"},
		{"espeak-ng", engines.Engine{Kind: engines.Espeak, Voice: "de", Model: "ignored"}, "espeak-ng (voice de)"},
		{"espeak-ng, default voice", engines.Engine{Kind: engines.Espeak}, "espeak-ng (voice en-us)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.e.Name(); got != c.want {
				t.Fatalf("Name() = %q, want %q", got, c.want)
			}
		})
	}
}

func TestV1(t *testing.T) {
	for in, want := range map[string]string{
		"http://speaches:8000":          "http://speaches:8000/v1",
		"http://speaches:8000/":         "http://speaches:8000/v1",
		"http://speaches:8000/v1":       "http://speaches:8000/v1",
		"http://speaches:8000/v1/":      "http://speaches:8000/v1",
		"http://proxy/tts?k=1":          "http://proxy/tts/v1?k=1",
		"http://u:p@speaches:8000/api/": "http://u:p@speaches:8000/api/v1",
		"":                              "",
	} {
		if got := engines.V1(in); got != want {
			t.Errorf("V1(%q) = %q, want %q", in, got, want)
		}
	}
}

func closedURL(t *testing.T) string {
	return "http://" + testkit.FreeAddr(t) + "/v1" // nothing listens there
}

func TestProbeServer(t *testing.T) {
	srv := fakeopenai.New(t, fakeopenai.WithAPIKey("sk-1"), fakeopenai.WithModels("fake-chat", "Systran/faster-whisper-large-v3"))
	many := fakeopenai.New(t, fakeopenai.WithModels("m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9", "m10"))
	empty := fakeopenai.New(t, fakeopenai.WithModels())
	hung := fakeopenai.New(t)
	hung.SetFault(fakeopenai.Fault{Hang: true})
	failing := fakeopenai.New(t)
	failing.SetFault(fakeopenai.Fault{Status: 503})
	for _, c := range []struct {
		name      string
		e         engines.Engine
		reachable bool
		answers   bool
		err       string // the whole error when it starts with "=", else a part of it
	}{
		{"model listed", engines.Engine{URL: srv.URL(), Model: "fake-chat", APIKey: "sk-1"}, true, true, "="},
		{"model listed, trailing slash", engines.Engine{URL: srv.URL() + "/", Model: "Systran/faster-whisper-large-v3", APIKey: "sk-1"}, true, true, "="},
		{"no model to check", engines.Engine{URL: srv.URL(), APIKey: "sk-1"}, true, true, "="},
		{"model not listed", engines.Engine{URL: srv.URL(), Model: "whisper-large-v3", APIKey: "sk-1"}, false, true,
			"=reachable, but model whisper-large-v3 is not served (serves: fake-chat, Systran/faster-whisper-large-v3)"},
		{"long list cut", engines.Engine{URL: many.URL(), Model: "kokoro"}, false, true,
			"=reachable, but model kokoro is not served (serves: m1, m2, m3, m4, m5, m6, m7, m8, … (10 in all))"},
		{"empty list", engines.Engine{URL: empty.URL(), Model: "kokoro"}, false, true,
			"=reachable, but model kokoro is not served (serves: none)"},
		{"wrong key", engines.Engine{URL: srv.URL(), Model: "fake-chat", APIKey: "nope"}, false, false, "=GET /models answered 401 Unauthorized"},
		{"server error", engines.Engine{URL: failing.URL(), Model: "fake-chat"}, false, false, "=GET /models answered 503 Service Unavailable"},
		{"down", engines.Engine{URL: closedURL(t), Model: "fake-chat"}, false, false, "refused"},
		{"hung", engines.Engine{URL: hung.URL(), Model: "fake-chat"}, false, false, "=no answer within 300ms"},
		{"not configured", engines.Engine{Model: "BAAI/bge-m3"}, false, false, "=" + engines.NotConfigured},
		{"not an OpenAI server", engines.Engine{URL: srv.URL() + "/chat/completions", Model: "fake-chat", APIKey: "sk-1"}, false, false, "answered"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := engines.Probe(context.Background(), nil, c.e, 300*time.Millisecond)
			if st.Reachable != c.reachable || st.Answers != c.answers {
				t.Fatalf("%+v: want reachable %v, answers %v", st, c.reachable, c.answers)
			}
			if want, exact := strings.CutPrefix(c.err, "="); exact && st.Error != want || !exact && !strings.Contains(st.Error, want) {
				t.Fatalf("error %q, want %q", st.Error, c.err)
			}
			if st.Name != c.e.Model || st.Model != c.e.Model || st.Kind != engines.OpenAI {
				t.Fatalf("%+v does not name model %q", st, c.e.Model)
			}
			if (c.e.URL == "") != (st.URL == "") {
				t.Fatalf("URL %q for configured URL %q", st.URL, c.e.URL)
			}
		})
	}
}

func TestProbeHidesCredentials(t *testing.T) {
	srv := fakeopenai.New(t)
	u := strings.Replace(srv.URL(), "http://", "http://user:pw@", 1) + "?x=1"
	st := engines.Probe(context.Background(), nil, engines.Engine{URL: u, Model: "fake-chat"}, time.Second)
	if !st.Reachable || st.URL != srv.URL() {
		t.Fatalf("%+v: want reachable at %s", st, srv.URL())
	}
}

// fakeEspeak is a stand-in binary that knows the voice en-us only.
func fakeEspeak(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "espeak-ng")
	script := "#!/bin/sh\n" +
		"[ \"$1\" = -q ] && [ \"$2\" = -v ] || { echo usage >&2; exit 2; }\n" +
		"[ \"$3\" = slow ] && exec sleep 10\n" +
		"[ \"$3\" = en-us ] && exit 0\n" +
		"echo 'Error: The specified espeak-ng voice does not exist.' >&2; exit 1\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProbeEspeak(t *testing.T) {
	bin := fakeEspeak(t)
	for _, c := range []struct {
		name      string
		e         engines.Engine
		reachable bool
		err       string
	}{
		{"runs", engines.Engine{Kind: engines.Espeak, Path: bin, Voice: "en-us"}, true, ""},
		{"default voice", engines.Engine{Kind: engines.Espeak, Path: bin}, true, ""},
		{"unknown voice", engines.Engine{Kind: engines.Espeak, Path: bin, Voice: "xx"}, false, "espeak-ng with voice xx failed: Error: The specified espeak-ng voice does not exist."},
		{"missing binary", engines.Engine{Kind: engines.Espeak, Path: filepath.Join(t.TempDir(), "espeak-ng"), Voice: "en-us"}, false, "espeak-ng not found"},
		{"hangs", engines.Engine{Kind: engines.Espeak, Path: bin, Voice: "slow"}, false, "espeak-ng gave no answer within 300ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := engines.Probe(context.Background(), nil, c.e, 300*time.Millisecond)
			if st.Reachable != c.reachable || !strings.HasPrefix(st.Error, c.err) || (c.err == "" && st.Error != "") {
				t.Fatalf("%+v, want reachable %v, error %q", st, c.reachable, c.err)
			}
			if !strings.HasPrefix(st.Name, "espeak-ng (voice ") || st.Kind != engines.Espeak || st.URL != "" || st.Voice == "" {
				t.Fatalf("%+v does not describe espeak-ng", st)
			}
		})
	}
}

// TestProbeRealEspeak runs the espeak-ng the tts service would run.
func TestProbeRealEspeak(t *testing.T) {
	if _, err := exec.LookPath(engines.DefaultEspeakPath); err != nil {
		testkit.Missing(t, "%v", err)
	}
	if st := engines.Probe(context.Background(), nil, engines.Engine{Kind: engines.Espeak}, 10*time.Second); !st.Reachable || st.Name != "espeak-ng (voice en-us)" {
		t.Fatalf("%+v", st)
	}
	if st := engines.Probe(context.Background(), nil, engines.Engine{Kind: engines.Espeak, Voice: "nosuchvoice"}, 10*time.Second); st.Reachable {
		t.Fatalf("an unknown voice is reachable: %+v", st)
	}
}
