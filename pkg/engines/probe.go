package engines

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// NotConfigured is the Error of a server engine without a URL.
const NotConfigured = "not configured"

// Status is what a probe found.
type Status struct {
	Name  string // Engine.Name
	Kind  string // OpenAI or Espeak
	Model string // servers only
	Voice string // speech engines only
	// URL is the base URL without credentials or query, safe to show
	// (servers only).
	URL string
	// Reachable: the engine can be used — the server answered GET /models
	// and lists the model, or the binary ran with the voice.
	Reachable bool
	// Answers: the server answered GET /models, whatever it lists (a
	// server that does not serve the model answers but is not Reachable).
	Answers bool
	// Error says why the engine is not Reachable.
	Error string
}

// shownModels bounds the served models an error lists.
const shownModels = 8

// Probe tells whether e is usable, giving up after timeout. A server is
// asked GET {URL}/models (OpenAI's model list, with the API key) and must
// list e.Model; espeak-ng is run with the voice, speaking nothing. client
// nil is http.DefaultClient.
func Probe(ctx context.Context, client *http.Client, e Engine, timeout time.Duration) Status {
	st := Describe(e)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if e.Local() {
		if err := runEspeak(ctx, e.Path, st.Voice); err != nil {
			st.Error = err.Error()
			if errors.Is(err, context.DeadlineExceeded) {
				st.Error = fmt.Sprintf("espeak-ng gave no answer within %s", timeout)
			}
			return st
		}
		st.Reachable = true
		return st
	}
	if e.URL == "" {
		st.Error = NotConfigured
		return st
	}
	served, err := listModels(ctx, client, e.URL, e.APIKey)
	if err != nil {
		st.Error = describe(err, timeout)
		return st
	}
	st.Answers = true
	if e.Model != "" && !slices.Contains(served, e.Model) {
		st.Error = notServed(e.Model, served)
		return st
	}
	st.Reachable = true
	return st
}

// Describe is what e is, not yet probed: Reachable false, no Error.
func Describe(e Engine) Status {
	st := Status{Name: e.Name(), Kind: e.Kind, Voice: e.Voice}
	if st.Kind == "" {
		st.Kind = OpenAI
	}
	if e.Local() {
		if st.Voice == "" {
			st.Voice = DefaultVoice(e.Kind)
		}
		return st
	}
	st.Model, st.URL = e.Model, display(e.URL)
	return st
}

// runEspeak runs espeak-ng quietly with voice: it fails when the binary is
// missing, does not run, or does not know the voice.
func runEspeak(ctx context.Context, path, voice string) error {
	if path == "" {
		path = DefaultEspeakPath
	}
	bin, err := exec.LookPath(path)
	if err != nil {
		return fmt.Errorf("espeak-ng not found: %w", err)
	}
	cmd := exec.CommandContext(ctx, bin, "-q", "-v", voice, "ready")
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("espeak-ng with voice %s failed: %s", voice, msg)
	}
	return nil
}

// errStatus is a /models answer that is not 2xx.
type errStatus string

func (e errStatus) Error() string { return "GET /models answered " + string(e) }

// listModels asks an OpenAI-compatible server for the ids of its models.
func listModels(ctx context.Context, client *http.Client, base, key string) ([]string, error) {
	if client == nil {
		client = http.DefaultClient
	}
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("bad URL: %w", err)
	}
	// Built on the parsed path: a base with a query or credentials stays valid.
	u.Path = strings.TrimRight(u.Path, "/") + "/models"
	u.RawPath = ""
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("bad URL: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body := io.LimitReader(resp.Body, 4<<20)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		_, _ = io.Copy(io.Discard, body)
		return nil, errStatus(resp.Status)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(body).Decode(&list); err != nil {
		return nil, fmt.Errorf("GET /models answered no model list: %w", err)
	}
	ids := make([]string, 0, len(list.Data))
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	return ids, nil
}

func notServed(model string, served []string) string {
	list := "none"
	if len(served) > 0 {
		shown := served
		if len(shown) > shownModels {
			shown = shown[:shownModels]
		}
		list = strings.Join(shown, ", ")
		if len(served) > shownModels {
			list += fmt.Sprintf(", … (%d in all)", len(served))
		}
	}
	return fmt.Sprintf("reachable, but model %s is not served (serves: %s)", model, list)
}

func describe(err error, timeout time.Duration) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no answer within %s", timeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // the url.Error would print the URL, credentials included
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Op + ": " + oe.Err.Error()
	}
	return err.Error()
}

// display is the URL without credentials or query, safe to show.
func display(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}
