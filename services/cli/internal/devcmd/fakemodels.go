package devcmd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/engines"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
)

// FakeBackend is one model server fake-models stands in for.
type FakeBackend struct {
	// URL is the base URL the services call (ALICIA_*_URL); with or
	// without the trailing /v1, as engines.V1 reads it.
	URL   string
	Model string // ALICIA_*_MODEL: what GET /models lists
}

// FakeModelsConfig says where `alicia dev fake-models` serves which model.
type FakeModelsConfig struct {
	LLM, ASR, TTS FakeBackend
	// Embeddings.URL empty: beside the LLM, where alicia up looks for the
	// embedding model (the memory service has no default embeddings URL).
	Embeddings FakeBackend
	// WordDelay paces streamed chat words and speech chunks, so a
	// client sees the answer arrive sentence by sentence; unused when
	// Profile paces them.
	WordDelay time.Duration
	// Profile is how long the models take (--profile); the zero profile
	// (instant) answers at once, paced by WordDelay only.
	Profile fakeopenai.Profile
}

// ProfileFlag is the --profile flag: a fakeopenai profile by name. It is a
// flag.Value and a pflag.Value; an unknown name is an error listing the
// known ones.
type ProfileFlag struct{ P *fakeopenai.Profile }

// String is the name of the profile set (instant for the zero profile).
func (f ProfileFlag) String() string {
	if f.P == nil || f.P.Name == "" {
		return fakeopenai.Instant.Name
	}
	return f.P.Name
}

// Set selects the profile called name.
func (f ProfileFlag) Set(name string) error {
	p, err := fakeopenai.ProfileByName(name)
	if err != nil {
		return err
	}
	*f.P = p
	return nil
}

// Type is what pflag shows in the help.
func (ProfileFlag) Type() string { return "name" }

// FakeModelsConfigFromEnv is the model URLs and names the services use:
// the defaults of pkg/engines, overridden by the same ALICIA_* variables.
func FakeModelsConfigFromEnv() FakeModelsConfig {
	c := FakeModelsConfig{
		LLM:        FakeBackend{URL: engines.DefaultLLMURL, Model: engines.DefaultLLMModel},
		ASR:        FakeBackend{URL: engines.DefaultASRURL, Model: engines.DefaultASRModel},
		TTS:        FakeBackend{URL: engines.DefaultTTSURL, Model: engines.DefaultTTSModel},
		Embeddings: FakeBackend{Model: engines.DefaultEmbeddingModel},
		WordDelay:  40 * time.Millisecond,
	}
	for name, dst := range map[string]*string{
		"ALICIA_LLM_URL": &c.LLM.URL, "ALICIA_LLM_MODEL": &c.LLM.Model,
		"ALICIA_ASR_URL": &c.ASR.URL, "ALICIA_ASR_MODEL": &c.ASR.Model,
		"ALICIA_TTS_URL": &c.TTS.URL, "ALICIA_TTS_MODEL": &c.TTS.Model,
		"ALICIA_EMBEDDING_URL": &c.Embeddings.URL, "ALICIA_EMBEDDING_MODEL": &c.Embeddings.Model,
	} {
		config.String(name, dst)
	}
	return c
}

// fakeRole is one backend as served: what it is, where, which model.
type fakeRole struct {
	label, what string
	env         string // the variable alicia up reads its URL from
	url         string // engines.V1 of the configured URL
	given       string // the configured URL, as an export shows it
	model       string
}

func (c FakeModelsConfig) roles() []fakeRole {
	emb := c.Embeddings.URL
	if emb == "" {
		emb = c.LLM.URL
	}
	return []fakeRole{
		{"LLM", "chat completions, streamed word by word", "ALICIA_LLM_URL", engines.V1(c.LLM.URL), c.LLM.URL, c.LLM.Model},
		{"ASR", "transcriptions: always the same canned transcript", "ALICIA_ASR_URL", engines.V1(c.ASR.URL), c.ASR.URL, c.ASR.Model},
		{"TTS", "speech: voice-like audio (pcm or wav), as long as the text", "ALICIA_TTS_URL", engines.V1(c.TTS.URL), c.TTS.URL, c.TTS.Model},
		{"Embeddings", fmt.Sprintf("embeddings, %d dimensions", fakeopenai.DefaultDims), "ALICIA_EMBEDDING_URL", engines.V1(emb), emb, c.Embeddings.Model},
	}
}

// fakeSite is one base URL and the backends served there: one fake
// handler, whose GET /models lists exactly their models.
type fakeSite struct {
	url    string
	prefix string // the path before /v1
	roles  []fakeRole
	h      *fakeopenai.Handler
}

// fakeListener is one address and the sites it serves.
type fakeListener struct {
	addr  string
	sites []*fakeSite
	srv   *http.Server
	ln    net.Listener
}

// plan groups the backends by base URL, and the base URLs by address, so
// backends sharing a host:port share one listener.
func (c FakeModelsConfig) plan() ([]*fakeListener, error) {
	var errs []error
	var lns []*fakeListener
	sites := map[string]*fakeSite{}
	for _, r := range c.roles() {
		if r.model == "" {
			errs = append(errs, fmt.Errorf("%s: the model name is empty", r.label))
		}
		u, err := url.Parse(r.url)
		if err != nil || u.Scheme != "http" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" ||
			strings.ContainsAny(u.Path, "{}") {
			errs = append(errs, fmt.Errorf("%s: %q is not a plain http://host:port URL (fake-models serves plain HTTP)", r.label, r.given))
			continue
		}
		addr := u.Host
		if u.Port() == "" {
			addr = net.JoinHostPort(u.Hostname(), "80")
		}
		prefix := strings.TrimSuffix(u.Path, "/v1")
		if s := sites[addr+prefix]; s != nil {
			s.roles = append(s.roles, r)
			continue
		}
		s := &fakeSite{url: r.url, prefix: prefix, roles: []fakeRole{r}}
		sites[addr+prefix] = s
		i := slices.IndexFunc(lns, func(l *fakeListener) bool { return l.addr == addr })
		if i < 0 {
			lns = append(lns, &fakeListener{addr: addr})
			i = len(lns) - 1
		}
		lns[i].sites = append(lns[i].sites, s)
	}
	return lns, errors.Join(errs...)
}

// FakeModels serves pkg/fakeopenai, with canned answers that say
// so, at the model URLs the services use, so that `alicia up` in another
// terminal has every model it needs without a GPU. It binds only the
// addresses of those URLs, prints what it serves on stdout and runs until
// ctx ends.
func FakeModels(ctx context.Context, cfg FakeModelsConfig, stdout io.Writer) error {
	lns, err := cfg.plan()
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	for _, l := range lns {
		if l.ln, err = net.Listen("tcp", l.addr); err != nil {
			closeAll(lns)
			return fmt.Errorf("listen on %s for %s (is a model server already running there?): %w", l.addr, l.labels(), err)
		}
		mux := http.NewServeMux()
		for _, s := range l.sites {
			s.h = newCannedHandler(s.models(), cfg.WordDelay, cfg.Profile)
			mux.Handle(s.prefix+"/v1/", http.StripPrefix(s.prefix, s.h))
		}
		l.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	}
	printFakeModels(stdout, lns, cfg.roles(), cfg.Profile)

	g, gctx := errgroup.WithContext(ctx)
	for _, l := range lns {
		g.Go(func() error {
			if err := l.srv.Serve(l.ln); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("serve %s: %w", l.addr, err)
			}
			return nil
		})
	}
	// Ctrl-C, or a listener that failed, stops them all.
	g.Go(func() error { <-gctx.Done(); shutdown(lns); return nil })
	return g.Wait()
}

func (l *fakeListener) labels() string {
	var out []string
	for _, s := range l.sites {
		for _, r := range s.roles {
			out = append(out, r.label)
		}
	}
	return strings.Join(out, ", ")
}

func (s *fakeSite) models() []string {
	var out []string
	for _, r := range s.roles {
		if !slices.Contains(out, r.model) {
			out = append(out, r.model)
		}
	}
	return out
}

// shutdown lets answers being streamed finish for a moment, then cuts them.
func shutdown(lns []*fakeListener) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	for _, l := range lns {
		for _, s := range l.sites {
			s.h.Close()
		}
		if err := l.srv.Shutdown(ctx); err != nil {
			_ = l.srv.Close()
		}
	}
}

func closeAll(lns []*fakeListener) {
	for _, l := range lns {
		if l.ln != nil {
			_ = l.ln.Close()
		}
	}
}

// printFakeModels says what is served where, and what alicia up needs
// set to use it: nothing when the defaults are served.
func printFakeModels(w io.Writer, lns []*fakeListener, roles []fakeRole, p fakeopenai.Profile) {
	fmt.Fprintln(w, "alicia dev fake-models: canned answers, no real model is running (Ctrl-C stops it)")
	if !p.IsInstant() {
		fmt.Fprintf(w, "  timing profile %s: transcription %s + %s per audio second; chat first token %s, %g tokens/s;\n"+
			"  speech first audio %s, %.3g× real time; embeddings %s + %s per input\n",
			ProfileFlag{&p}, p.Transcription.Fixed, p.Transcription.PerAudioSecond, p.Chat.TimeToFirstToken, p.Chat.TokensPerSecond,
			p.Speech.TimeToFirstAudio, 1/p.Speech.RealTimeFactor, p.Embeddings.Fixed, p.Embeddings.PerInput)
	}
	for _, l := range lns {
		for _, s := range l.sites {
			fmt.Fprintf(w, "  %s  (GET /models lists %s)\n", s.url, strings.Join(s.models(), ", "))
			for _, r := range s.roles {
				fmt.Fprintf(w, "    %-11s %s — %s\n", r.label+":", r.model, r.what)
			}
		}
	}
	ex := exports(roles)
	if len(ex) == 0 {
		fmt.Fprintln(w, "Run `alicia up` in another terminal: it uses all of these, with nothing to set.")
		return
	}
	fmt.Fprintln(w, "Run `alicia up` in another terminal, after this there (up uses the default model URLs unless told otherwise):")
	fmt.Fprintf(w, "  export %s\n", strings.Join(ex, " "))
}

// exports are the variables alicia up, in a shell with this environment,
// needs set to reach every backend served here: a URL given by flag, or
// one up would not use. Up calls the LLM and the ASR at their default URLs
// and, when ALICIA_TTS_URL and ALICIA_TTS_ENGINE are unset, looks for the
// speech model at the tts's default URL, as it looks for the embedding
// model at the LLM's default URL when ALICIA_EMBEDDING_URL is unset.
func exports(roles []fakeRole) []string {
	var out []string
	for _, r := range roles {
		used := os.Getenv(r.env)
		switch r.env {
		case "ALICIA_LLM_URL", "ALICIA_EMBEDDING_URL":
			used = cmp.Or(used, engines.DefaultLLMURL)
		case "ALICIA_ASR_URL":
			used = cmp.Or(used, engines.DefaultASRURL)
		case "ALICIA_TTS_URL":
			used = cmp.Or(used, engines.DefaultTTSURL)
		}
		if engines.V1(used) != r.url {
			out = append(out, r.env+"="+r.given)
		}
	}
	// Speech chosen to be local: up neither looks for a server nor uses one.
	if os.Getenv("ALICIA_TTS_ENGINE") == engines.Espeak {
		out = append(out, "ALICIA_TTS_ENGINE="+engines.OpenAI)
	}
	return out
}
