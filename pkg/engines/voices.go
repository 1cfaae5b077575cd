package engines

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"time"
)

// Voice is one voice a speech engine offers.
type Voice struct {
	ID       string // what a request names (OpenAI voice; espeak-ng -v)
	Name     string // for people ("" when the engine gives none)
	Language string // BCP 47 ("" when the engine does not say)
}

// Voices lists the voices of speech engine e: espeak-ng's own list
// (espeak-ng --voices), or an OpenAI-compatible server's
// GET {URL}/audio/speech/voices (speaches' list of its speech models'
// voices; with ?model_id= when e names a model). A server without the
// endpoint answers an error; the caller then offers the configured voice
// alone.
func Voices(ctx context.Context, client *http.Client, e Engine, timeout time.Duration) ([]Voice, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if e.Local() {
		return EspeakVoices(ctx, e.Path)
	}
	if e.URL == "" {
		return nil, fmt.Errorf("voices: %s", NotConfigured)
	}
	if client == nil {
		client = http.DefaultClient
	}
	u := V1(e.URL) + "/audio/speech/voices"
	if e.Model != "" {
		u += "?model_id=" + url.QueryEscape(e.Model)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if e.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+e.APIKey)
	}
	res, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("voices: %w", err)
	}
	defer res.Body.Close() //nolint:errcheck // read only
	body, err := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("voices: %w", err)
	}
	if res.StatusCode/100 != 2 {
		return nil, fmt.Errorf("voices: GET /audio/speech/voices answered %s", res.Status)
	}
	return parseServerVoices(body)
}

// serverVoice is one voice as the servers that list them write it:
// speaches ({voice_id, model_id, language?}), others ({id, name}).
type serverVoice struct {
	VoiceID  string `json:"voice_id"`
	ID       string `json:"id"`
	Name     string `json:"name"`
	Language string `json:"language"`
}

// parseServerVoices reads a JSON list of voices, bare or under "voices" or
// "data"; a voice may be an object or a string.
func parseServerVoices(body []byte) ([]Voice, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		var wrapped struct {
			Voices []json.RawMessage `json:"voices"`
			Data   []json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(body, &wrapped); err != nil {
			return nil, fmt.Errorf("voices: not a list of voices: %w", err)
		}
		raw = append(wrapped.Voices, wrapped.Data...)
	}
	out := make([]Voice, 0, len(raw))
	seen := map[string]bool{}
	for _, r := range raw {
		var v serverVoice
		if err := json.Unmarshal(r, &v); err != nil {
			var s string
			if json.Unmarshal(r, &s) != nil {
				continue
			}
			v.ID = s
		}
		id := v.VoiceID
		if id == "" {
			id = v.ID
		}
		if id == "" {
			id = v.Name
		}
		if id == "" || seen[id] {
			continue
		}
		seen[id] = true
		name := v.Name
		if name == id {
			name = ""
		}
		out = append(out, Voice{ID: id, Name: name, Language: v.Language})
	}
	return out, nil
}

// EspeakVoices runs espeak-ng --voices (path "" is DefaultEspeakPath):
// each voice's id is its language code, which -v takes.
func EspeakVoices(ctx context.Context, path string) ([]Voice, error) {
	if path == "" {
		path = DefaultEspeakPath
	}
	bin, err := exec.LookPath(path)
	if err != nil {
		return nil, fmt.Errorf("espeak-ng not found: %w", err)
	}
	cmd := exec.CommandContext(ctx, bin, "--voices")
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("espeak-ng --voices: %w", err)
	}
	return ParseEspeakVoices(string(out)), nil
}

// ParseEspeakVoices reads espeak-ng --voices' table: "Pty Language
// Age/Gender VoiceName File Other Languages".
func ParseEspeakVoices(out string) []Voice {
	var vs []Voice
	seen := map[string]bool{}
	for i, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 4 {
			continue
		}
		id := f[1]
		if seen[id] {
			continue
		}
		seen[id] = true
		vs = append(vs, Voice{ID: id, Name: strings.ReplaceAll(f[3], "_", " "), Language: espeakTag(id)})
	}
	return vs
}

// espeakTag turns an espeak-ng language code (en-us, pt-br, en-gb-x-rp)
// into a BCP 47 tag (en-US, pt-BR, en-GB-x-rp).
func espeakTag(code string) string {
	parts := strings.Split(code, "-")
	for i := 1; i < len(parts); i++ {
		if parts[i-1] == "x" {
			break
		}
		if len(parts[i]) == 2 {
			parts[i] = strings.ToUpper(parts[i])
		}
	}
	return strings.Join(parts, "-")
}
