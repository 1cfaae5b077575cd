package devcmd

import (
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
)

// What the fake models say. Each says plainly that it is canned, so nobody
// takes an answer of `alicia dev fake-models` for a model's.
const (
	// CannedMarker starts every chat answer.
	CannedMarker = "(Canned answer from alicia dev fake-models — no real model is running.)"
	// CannedTranscript is what the fake ASR hears in any speech.
	CannedTranscript = "This is a canned transcript from alicia dev fake-models: no speech recognition is running, so it hears this whatever you say."
)

// echoRunes bounds how much of the user's message an answer repeats.
const echoRunes = 200

// newCannedHandler is a fake serving models that answers every request
// with a canned answer and keeps no requests. A timing profile paces it;
// the instant one is paced by delay between streamed chunks.
func newCannedHandler(models []string, delay time.Duration, p fakeopenai.Profile) *fakeopenai.Handler {
	h := fakeopenai.NewHandler(fakeopenai.WithModels(models...), fakeopenai.WithResponder(cannedTurn), fakeopenai.WithoutRecording(),
		fakeopenai.WithProfile(p))
	h.SetTranscriber(cannedTranscript)
	if p.IsInstant() {
		h.SetFault(fakeopenai.Fault{ChunkDelay: delay})
	}
	return h
}

// cannedTurn answers a chat request: the JSON asked for by a request with
// a response format (the memory service's extraction), else a few
// sentences that say they are canned and repeat the user's last message.
func cannedTurn(req fakeopenai.Request) fakeopenai.Turn {
	if schema, ok := jsonFormat(req.Body); ok {
		return fakeopenai.Turn{Text: []string{structured(schema, req.LastUser())}}
	}
	said := strings.Join(strings.Fields(req.LastUser()), " ")
	echo := "You sent nothing I could read."
	if said != "" {
		if r := []rune(said); len(r) > echoRunes {
			said = string(r[:echoRunes]) + "…"
		}
		echo = "You said: “" + said + "”"
		if last, _ := utf8.DecodeLastRuneInString(said); !strings.ContainsRune(".!?…", last) {
			echo += "."
		}
	}
	return fakeopenai.Text(CannedMarker + " " + echo +
		" A real model would answer that here; this one only repeats your words, so that chat, voice and memory can be tried without a GPU." +
		" For real answers, point ALICIA_LLM_URL at vLLM or another OpenAI-compatible server.")
}

// jsonFormat reports whether a chat request asks for JSON, and the name
// of its JSON schema if it gives one.
func jsonFormat(body []byte) (schema string, ok bool) {
	var r struct {
		ResponseFormat *struct {
			Type       string `json:"type"`
			JSONSchema *struct {
				Name string `json:"name"`
			} `json:"json_schema"`
		} `json:"response_format"`
	}
	if json.Unmarshal(body, &r) != nil || r.ResponseFormat == nil || !strings.HasPrefix(r.ResponseFormat.Type, "json") {
		return "", false
	}
	if r.ResponseFormat.JSONSchema != nil {
		schema = r.ResponseFormat.JSONSchema.Name
	}
	return schema, true
}

// structured is the JSON answer for a schema. The memory extraction
// ("memories", shown "User: …\n\nAssistant: …") keeps what the user asked
// to remember, so memory can be tried; nothing else is known.
func structured(schema, prompt string) string {
	if schema != "memories" {
		return "{}"
	}
	type memory struct {
		Content    string   `json:"content"`
		Tags       []string `json:"tags"`
		Importance float64  `json:"importance"`
	}
	out := struct {
		Memories []memory `json:"memories"`
	}{Memories: []memory{}}
	user, _, _ := strings.Cut(strings.TrimPrefix(prompt, "User: "), "\n\nAssistant: ")
	user = strings.Join(strings.Fields(user), " ")
	if strings.Contains(strings.ToLower(user), "remember") {
		if r := []rune(user); len(r) > echoRunes {
			user = string(r[:echoRunes]) + "…"
		}
		out.Memories = append(out.Memories, memory{Content: "The user asked to remember: " + user, Tags: []string{"canned"}, Importance: 0.5})
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// cannedTranscript hears CannedTranscript in anything but silence.
func cannedTranscript(r fakeopenai.TranscriptionRequest) fakeopenai.Transcript {
	if r.LevelDBFS < fakeopenai.SilenceDBFS {
		return fakeopenai.Transcript{}
	}
	return fakeopenai.Transcript{Text: CannedTranscript}
}
