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
	system := ""
	if len(req.Messages) > 0 && req.Messages[0].Role == "system" {
		system = req.Messages[0].Content
	}
	if schema, ok := jsonFormat(req.Body); ok {
		if schema == "" && strings.Contains(system, "correctness") && strings.Contains(system, "faithfulness") {
			return fakeopenai.Turn{Text: []string{cannedVerdict(system, req.LastUser())}}
		}
		return fakeopenai.Turn{Text: []string{structured(schema, req.LastUser())}}
	}
	if strings.HasPrefix(system, "You name conversations") {
		return fakeopenai.Text(cannedTitle(req.LastUser()))
	}
	if strings.HasPrefix(req.LastUser(), "I provided an assistant") {
		return fakeopenai.Text(cannedProposal(req.LastUser()))
	}
	if strings.Contains(system, cannedBrief) {
		return fakeopenai.Text(CannedMarker + " A short answer, as the prompt asks.")
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

// The prompt optimiser's fakes: the judge finds short answers relevant
// (the canned answers are long), and the reflection model proposes asking
// for short answers, which the canned chat then follows, so that "Improve
// Alicia" can be tried end to end without a GPU: a run finds cannedBrief
// and its elite answers shortly. Both say they are canned.
const (
	cannedBrief = "Keep every answer to one short sentence."
	// cannedProposalNote ends what the fake reflection model proposes.
	cannedProposalNote = "(Canned proposal from alicia dev fake-models.)"
)

// cannedVerdict judges the answer in a judge request (the optimiser's
// JSON input, or the judge's own prompt, whose answer comes last), with
// exactly the keys its instructions (system) ask for.
func cannedVerdict(system, input string) string {
	answer := input
	var in struct {
		Answer string `json:"answer"`
	}
	if json.Unmarshal([]byte(input), &in) == nil && in.Answer != "" {
		answer = in.Answer
	} else if i := strings.LastIndex(input, "Answer"); i >= 0 {
		answer = input[i:]
	}
	relevancy, why := 1.0, "(Canned judgement from alicia dev fake-models.) The answer is short and to the point."
	if len(strings.Fields(answer)) > 20 {
		relevancy, why = 0.4, "(Canned judgement from alicia dev fake-models.) The answer is too long for what was asked."
	}
	v := map[string]any{"correctness": 0.7, "faithfulness": 1, "relevancy": relevancy, "rationale": why}
	if strings.Contains(system, "userFeedback") {
		v["userFeedback"] = -1
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// cannedProposal rewrites the component shown in a reflection request:
// it adds cannedBrief when the feedback says answers are too long.
func cannedProposal(prompt string) string {
	_, rest, _ := strings.Cut(prompt, "```\n")
	current, _, _ := strings.Cut(rest, "\n```")
	current = strings.TrimSpace(current)
	if strings.Contains(prompt, "too long") && !strings.Contains(current, cannedBrief) {
		current = strings.TrimSpace(current + " " + cannedBrief + " " + cannedProposalNote)
	}
	return "```\n" + current + "\n```"
}

// cannedTitle names a conversation (the llm's title request shows it as
// "Person: …" and "Alicia: …" lines) by the first words the person said,
// so titles can be tried without a model.
func cannedTitle(transcript string) string {
	for _, line := range strings.Split(transcript, "\n") {
		if said, ok := strings.CutPrefix(line, "Person: "); ok {
			words := strings.Fields(said)
			if len(words) > 5 {
				words = words[:5]
			}
			if len(words) > 0 {
				return strings.Join(words, " ")
			}
		}
	}
	return "KEEP"
}
