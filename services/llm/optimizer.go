package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/sashabaranov/go-openai"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/config"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/llm/internal/gepa"
	"github.com/alicia-voice/alicia/services/llm/internal/optimize"
	"github.com/alicia-voice/alicia/services/llm/internal/prompts"
	"github.com/alicia-voice/alicia/services/llm/internal/tools"
)

// OptimizerConfig is the prompt optimiser (internal/optimize): a worker of
// its own in every replica that runs it, on its own consumer, whose model
// requests wait for the replica's turns.
type OptimizerConfig struct {
	// Enabled runs the optimiser in this replica (ALICIA_OPTIMIZER, default
	// true). Deployments that keep it off the turn replicas run it on
	// replicas of their own (ALICIA_OPTIMIZER=only: no turns taken).
	Enabled bool
	// Only: this replica does optimisation runs and takes no turns.
	Only bool
	// URL, Model and APIKey of the reflection model that rewrites the
	// components (ALICIA_OPTIMIZER_URL, _MODEL, _API_KEY or _FILE). Empty:
	// the LLM's own; the LLM's key is used only when the URL is the LLM's.
	URL, Model, APIKey string
	// MaxBudget bounds a run's metric calls (ALICIA_OPTIMIZER_MAX_BUDGET).
	MaxBudget int
	// Timeout bounds one model request of a run (ALICIA_OPTIMIZER_TIMEOUT).
	Timeout time.Duration
}

// DefaultOptimizerConfig: on, the LLM reflecting, at most 2000 metric
// calls a run.
func DefaultOptimizerConfig() OptimizerConfig {
	return OptimizerConfig{Enabled: true, MaxBudget: 2000, Timeout: 2 * time.Minute}
}

// From overrides c with the ALICIA_OPTIMIZER* settings of src.
func (c *OptimizerConfig) From(src config.Source) error {
	var errs []error
	switch v := strings.ToLower(src.Get("ALICIA_OPTIMIZER")); v {
	case "":
	case "true", "1", "on":
		c.Enabled, c.Only = true, false
	case "false", "0", "off":
		c.Enabled, c.Only = false, false
	case "only":
		c.Enabled, c.Only = true, true
	default:
		errs = append(errs, fmt.Errorf("ALICIA_OPTIMIZER=%q from %s: want true, false or only", v, src.Origin("ALICIA_OPTIMIZER")))
	}
	src.String("ALICIA_OPTIMIZER_URL", &c.URL)
	src.String("ALICIA_OPTIMIZER_MODEL", &c.Model)
	errs = append(errs,
		src.Secret("ALICIA_OPTIMIZER_API_KEY", &c.APIKey),
		src.Int("ALICIA_OPTIMIZER_MAX_BUDGET", &c.MaxBudget),
		src.Duration("ALICIA_OPTIMIZER_TIMEOUT", &c.Timeout))
	return errors.Join(errs...)
}

// Validate reports every problem at once.
func (c OptimizerConfig) Validate() error {
	var errs []error
	if c.URL != "" {
		if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("ALICIA_OPTIMIZER_URL %q is not an http(s) URL (leave it unset for the LLM's)", c.URL))
		}
	}
	if c.MaxBudget < 1 || c.MaxBudget > 100000 {
		errs = append(errs, fmt.Errorf("ALICIA_OPTIMIZER_MAX_BUDGET %d is outside 1..100000", c.MaxBudget))
	}
	if c.Timeout <= 0 {
		errs = append(errs, errors.New("ALICIA_OPTIMIZER_TIMEOUT must be positive"))
	}
	return errors.Join(errs...)
}

// reflectionEndpoint is the reflection model's URL, name and key: the
// LLM's where unset.
func (c Config) reflectionEndpoint() (u, model, key string) {
	u, model, key = c.Optimizer.URL, c.Optimizer.Model, c.Optimizer.APIKey
	if u == "" {
		u = c.LLMURL
		if key == "" {
			key = c.APIKey
		}
	}
	if model == "" {
		model = c.Model
	}
	return u, model, key
}

// runQuerier reads a run's status (and the stored turns) read-only.
type runQuerier interface {
	optimize.Querier
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// startOptimizer runs the optimiser until ctx ends; stop waits for it
// (the run in progress is handed back). Off: it runs nothing.
func startOptimizer(ctx context.Context, cfg Config, nc *nats.Conn, js jetstream.JetStream, db runQuerier, catalog *prompts.Catalog,
	toolbox Toolbox, gate *optimize.Gate, log zerolog.Logger) (stop func()) {
	if !cfg.Optimizer.Enabled {
		log.Info().Msg("optimiser off (ALICIA_OPTIMIZER=false)")
		return func() {}
	}
	log = log.With().Str("worker", "optimizer").Logger()
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	// Every request of a run waits for this replica's turns.
	hc := &http.Client{Transport: gate.Transport(transport), Timeout: cfg.Optimizer.Timeout}
	client := func(u, key string) *openai.Client {
		oc := openai.DefaultConfig(key)
		oc.BaseURL, oc.HTTPClient = strings.TrimRight(u, "/"), hc
		return openai.NewClientWithConfig(oc)
	}
	ju, jmodel, jkey := cfg.judgeEndpoint()
	ru, rmodel, rkey := cfg.reflectionEndpoint()
	adapter := &optimize.Adapter{Chat: client(cfg.LLMURL, cfg.APIKey), Model: cfg.Model,
		Judge: optimize.ModelJudge{Chat: client(ju, jkey), Model: jmodel}}
	w := &optimize.Worker{NC: nc, JS: js, MaxBudget: cfg.Optimizer.MaxBudget, Log: log,
		Status: func(ctx context.Context, id string) (string, error) {
			var s string
			err := db.QueryRow(ctx, `SELECT status FROM prompt_optimization_runs WHERE id = $1`, id).Scan(&s)
			if errors.Is(err, pgx.ErrNoRows) {
				return "", nil
			}
			return s, err
		},
		Runner: &optimize.Runner{
			Turns: func(ctx context.Context, s optimize.Scope, limit int) ([]optimize.Turn, error) {
				adapter.Tools = toolDefs(ctx, toolbox)
				return optimize.Load(ctx, db, s, limit)
			},
			Seed: func(_ context.Context, s optimize.Scope) (gepa.Candidate, error) {
				return seedCandidate(catalog, s.Owner), nil
			},
			Adapter: adapter, Reflector: optimize.ModelReflector{Chat: client(ru, rkey), Model: rmodel},
			Publish: func(ctx context.Context, o *protocol.EliteOptions) error {
				_, err := bus.NewPublisher(js).PublishSystem(ctx, protocol.New("", o), "")
				return err
			},
		}}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer transport.CloseIdleConnections()
		for wctx.Err() == nil {
			err := w.Run(wctx)
			if err == nil || wctx.Err() != nil {
				return
			}
			log.Error().Err(err).Msg("optimiser consumer failed; retrying in 5s")
			select {
			case <-wctx.Done():
			case <-time.After(5 * time.Second):
			}
		}
	}()
	log.Info().Str("reflection_model", rmodel).Str("judge_model", jmodel).Int("max_budget", cfg.Optimizer.MaxBudget).Msg("optimiser running")
	return func() { cancel(); <-done }
}

// seedCandidate is the texts serving owner's answers ("" the
// installation's), by component: where a run starts.
func seedCandidate(catalog *prompts.Catalog, owner string) gepa.Candidate {
	ch := catalog.For("", owner)
	out := gepa.Candidate{}
	for _, c := range catalog.Components() {
		if text, _, ok := ch.Text(c); ok {
			out[c] = text
		}
	}
	return out
}

// toolDefs are the tools a replayed turn is offered.
func toolDefs(ctx context.Context, toolbox Toolbox) []optimize.ToolDef {
	if toolbox == nil {
		return nil
	}
	var out []optimize.ToolDef
	for _, s := range toolbox.Available(ctx) {
		if s.Source != tools.SourceBuiltin {
			continue // an MCP server's tools may be gone; their recorded results stay
		}
		params, err := json.Marshal(s.Parameters)
		if err != nil {
			continue
		}
		out = append(out, optimize.ToolDef{Name: s.Name, Description: s.Description, Parameters: params})
	}
	return out
}
