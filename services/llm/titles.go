package llm

import (
	"context"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/sashabaranov/go-openai"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/services/llm/internal/answerend"
	"github.com/alicia-voice/alicia/services/llm/internal/optimize"
	"github.com/alicia-voice/alicia/services/llm/internal/titles"
)

// titleTimeout bounds one title request.
const titleTimeout = 30 * time.Second

// startTitles names conversations after their answers (internal/titles)
// with the LLM, on its own consumer, its requests waiting for this
// replica's turns (gate): nothing is added to an answer. Off
// (ALICIA_LLM_TITLES=false): it runs nothing.
func startTitles(ctx context.Context, cfg Config, nc *nats.Conn, js jetstream.JetStream, db titles.Querier, gate *optimize.Gate,
	counted func(outcome string), log zerolog.Logger) (stop func()) {
	if !cfg.Titles {
		log.Info().Msg("titles off (ALICIA_LLM_TITLES=false)")
		return func() {}
	}
	log = log.With().Str("worker", "titles").Logger()
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL, oc.HTTPClient = strings.TrimRight(cfg.LLMURL, "/"), &http.Client{Transport: gate.Transport(transport), Timeout: titleTimeout}
	t := &titles.Titler{DB: db, Chat: openai.NewClientWithConfig(oc), Model: cfg.Model, Publisher: bus.NewPublisher(js), Log: log,
		Applied: func(ctx context.Context, seq uint64) error {
			return rpc.WaitApplied(ctx, nc, bus.StreamConversations, seq)
		},
		Generated: func() { counted("generated") }, Kept: func() { counted("kept") }}
	stopConsumer := answerend.RunRetrying(ctx, &answerend.Consumer{JS: js, Name: titles.ConsumerName,
		Description: "llm: titles conversations after their answers", Handle: t.Answer,
		GiveUp: func(id string, err error) {
			counted("failed")
			log.Warn().Err(err).Str("answer_id", id).Msg("no title after the last try")
		},
		Concurrency: 1, Timeout: titleTimeout, MaxDeliver: 3, Log: log})
	log.Info().Str("model", cfg.Model).Msg("titles running")
	return func() { stopConsumer(); transport.CloseIdleConnections() }
}
