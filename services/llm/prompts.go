package llm

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/promptver"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/llm/internal/prompts"
	"github.com/alicia-voice/alicia/services/llm/internal/tools"
)

// seedTexts are the components' built-in texts: the configured system
// prompt and voice style, the demonstrations instruction, and each
// built-in tool's description. (memory_extraction is the memory service's.)
func seedTexts(ctx context.Context, cfg Config, toolbox Toolbox) map[string]string {
	seeds := map[string]string{prompts.System: cfg.SystemPrompt, prompts.Demonstrations: DefaultDemonstrations}
	if cfg.VoiceStyle != "" {
		seeds[prompts.VoiceStyle] = cfg.VoiceStyle
	}
	if toolbox != nil {
		for _, s := range toolbox.Available(ctx) {
			if s.Source == tools.SourceBuiltin && s.Description != "" {
				seeds[prompts.ToolPrefix+s.Name] = s.Description
			}
		}
	}
	return seeds
}

// startPrompts publishes the seed versions the database lacks, loads the
// active versions and keeps them fresh until the returned stop.
func startPrompts(ctx context.Context, cfg Config, pub *bus.Publisher, rd *promptver.Reader, toolbox Toolbox, log zerolog.Logger) (*prompts.Catalog, func(), error) {
	cat := prompts.NewCatalog(seedTexts(ctx, cfg, toolbox))
	cat.Load, cat.Every, cat.Log = rd.Active, cfg.PromptReload, log
	installed, err := rd.Installation(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("llm: prompt versions: %w", err)
	}
	n, err := prompts.Seed(ctx, cat.Seeds(), installed, publisher(pub), time.Now())
	if err != nil {
		return nil, nil, fmt.Errorf("llm: %w", err)
	}
	if n > 0 {
		log.Info().Int("components", n).Msg("prompt seed versions published")
	}
	if err := cat.Reload(ctx); err != nil {
		// The seeds serve until the next reload.
		log.Warn().Err(err).Msg("prompt versions not loaded; the seed texts serve")
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); cat.Run(rctx) }()
	return cat, func() { stop(); <-done }, nil
}

// publisher publishes PromptVersions on alicia.sys.prompt_version.
func publisher(pub *bus.Publisher) prompts.Publisher {
	return func(ctx context.Context, v *protocol.PromptVersion, msgID string) error {
		_, err := pub.PublishSystem(ctx, protocol.New("", v), msgID)
		return err
	}
}
