package app

import (
	"context"
	"fmt"
	"time"

	"github.com/alicia-voice/alicia/pkg/promptver"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/memory/internal/models"
	"github.com/alicia-voice/alicia/services/memory/internal/store"
)

// PromptVersions reads the memory_extraction versions (store.Store).
type PromptVersions interface {
	ActivePromptVersions(ctx context.Context, component, user string) (mine, installation []promptver.Version, err error)
	InstallationPromptVersions(ctx context.Context, component string) ([]store.PromptVersion, error)
}

// extractionPrompt is the memory_extraction version serving conversation
// cid of user, as the llm chooses its components: the person's own
// active version, else the installation's, a rollout by conversation id;
// the built-in text (version id "") when none serves or they cannot be
// read. Read from Postgres at each extraction: it runs after the answer,
// off the turn.
func (a *App) extractionPrompt(ctx context.Context, cid, user string) (text, versionID string) {
	if a.Prompts == nil {
		return models.ExtractionPrompt, ""
	}
	mine, installation, err := a.Prompts.ActivePromptVersions(ctx, promptver.MemoryExtraction, user)
	if err != nil {
		a.Log.Warn().Err(err).Msg("memory_extraction versions unreadable; the built-in prompt serves")
		return models.ExtractionPrompt, ""
	}
	for _, scope := range [][]promptver.Version{mine, installation} {
		if v, ok := promptver.Choose(scope, cid); ok {
			return v.Text, v.ID
		}
	}
	return models.ExtractionPrompt, ""
}

// SeedExtractionPrompt publishes the built-in extraction prompt as a
// memory_extraction version (createdBy seed, active) unless an
// installation-wide version has its text: version 1, or the next when an
// upgrade changed the text. The id is derived from the text and is the
// Nats-Msg-Id, so replicas starting together publish it once.
func (a *App) SeedExtractionPrompt(ctx context.Context) error {
	vs, err := a.Prompts.InstallationPromptVersions(ctx, promptver.MemoryExtraction)
	if err != nil {
		return err
	}
	next := int32(1)
	for _, v := range vs {
		if v.Text == models.ExtractionPrompt {
			return nil
		}
		next = max(next, v.Number+1)
	}
	id := promptver.SeedID(promptver.MemoryExtraction, models.ExtractionPrompt)
	pv := &protocol.PromptVersion{ID: id, Component: promptver.MemoryExtraction, Version: next, Text: models.ExtractionPrompt,
		Status: protocol.PromptVersionStatusActive, CreatedBy: "seed", CreatedAt: time.Now().UnixMilli()}
	if _, err := a.Publisher.PublishSystem(ctx, protocol.New("", pv), id); err != nil {
		return fmt.Errorf("publish the memory_extraction seed: %w", err)
	}
	return nil
}
