package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/memory/internal/models"
	"github.com/alicia-voice/alicia/services/memory/internal/store"
)

// ExtractTurn extracts memories from the turn that ended with answer
// answerID (stored at CONVERSATIONS sequence seq): the LLM proposes durable
// facts about the user; each is embedded and compared with the user's
// nearest memory. A near-duplicate (similarity ≥ the duplicate threshold)
// updates that memory (new content, tags merged, importance the higher);
// anything else becomes a new memory with source "extraction". Failed or
// interrupted answers, turns without a user message and a malformed LLM
// answer yield nothing. An error is worth retrying (a backend is down).
func (a *App) ExtractTurn(ctx context.Context, answerID string, seq uint64) error {
	if a.Extractor == nil || a.Embedder == nil {
		return nil
	}
	log := a.Log.With().Str("answer_id", answerID).Logger()
	if err := a.Applied(ctx, bus.StreamConversations, seq); err != nil {
		return fmt.Errorf("wait for persistence: %w", err)
	}
	turn, err := a.Memories.Turn(ctx, answerID)
	if errors.Is(err, store.ErrNotFound) {
		log.Debug().Msg("answer not stored; nothing to extract")
		return nil
	}
	if err != nil {
		return storeErr(err)
	}
	log = log.With().Str("conversation_id", turn.ConversationID).Logger()
	switch {
	case turn.AnswerStatus == "failed" || turn.Interrupted:
		log.Debug().Str("status", turn.AnswerStatus).Bool("interrupted", turn.Interrupted).Msg("answer failed or interrupted; no extraction")
		return nil
	case turn.PromptRole != "user" || turn.UserID == "" || turn.Prompt == "" || turn.Answer == "":
		log.Debug().Msg("no user message or no owner; no extraction")
		return nil
	}
	start := time.Now()
	system, promptVersion := a.extractionPrompt(ctx, turn.ConversationID, turn.UserID)
	cands, err := a.Extractor.Extract(ctx, system, turn.Prompt, turn.Answer)
	switch {
	case errors.Is(err, models.ErrMalformed):
		log.Warn().Err(err).Msg("extraction answer is not the expected JSON; skipped")
		return nil
	case errors.Is(err, models.ErrRejected):
		log.Error().Err(err).Msg("the LLM rejected the extraction request; skipped")
		return nil
	case err != nil:
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if len(cands) == 0 {
		log.Debug().Dur("took", time.Since(start)).Msg("nothing worth remembering")
		return nil
	}
	texts := make([]string, len(cands))
	for i, c := range cands {
		texts[i] = c.Content
	}
	vecs, err := a.embed(ctx, texts...)
	if err != nil {
		return err
	}
	cands, vecs = a.mergeCandidates(cands, vecs)
	info := a.sourceInfo(turn, promptVersion)
	created, updated := 0, 0
	for i, c := range cands {
		act, err := a.extractedAction(ctx, turn, c, vecs[i], info)
		if err != nil {
			return err
		}
		if act == nil {
			continue
		}
		// The same turn extracted again (a redelivery) publishes the same
		// message ids, which JetStream drops as duplicates.
		msgID := "extraction:" + answerID + ":" + strconv.Itoa(i)
		if err := a.publishAction(ctx, turn.UserID, *act, msgID); err != nil {
			return err
		}
		if act.Action == protocol.MemoryActionActionCreate {
			created++
		} else {
			updated++
		}
	}
	log.Info().Int("created", created).Int("updated", updated).Dur("took", time.Since(start)).Msg("memories extracted")
	return nil
}

// extractedAction is the create or update one candidate leads to, or nil
// when it would change nothing or the user archived the same memory.
func (a *App) extractedAction(ctx context.Context, turn store.Turn, c models.Candidate, vec []float32, info protocol.MemoryActionMemorySourceInfo) (*protocol.MemoryAction, error) {
	m := &protocol.MemoryActionMemory{
		Content:         c.Content,
		Tags:            c.Tags,
		Importance:      protocol.Ptr(c.Importance),
		Embedding:       float64s(vec),
		EmbeddingModel:  protocol.Ptr(a.Embedder.Model()),
		Source:          protocol.Ptr(SourceExtraction),
		SourceMessageID: protocol.Ptr(turn.PromptID),
		SourceInfo:      info,
	}
	act := &protocol.MemoryAction{ID: protocol.NewID("amact"), Action: protocol.MemoryActionActionCreate, Memory: m, Timestamp: time.Now().UnixMilli()}
	near, sim, err := a.Memories.Nearest(ctx, turn.UserID, vec)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, storeErr(err)
	case sim >= a.Settings.DuplicateThreshold && near.Archived:
		return nil, nil // the user put this memory away; do not bring it back
	case sim >= a.Settings.DuplicateThreshold:
		tags := unionTags(near.Tags, c.Tags)
		importance := max(near.Importance, c.Importance)
		if near.Content == c.Content && importance == near.Importance && len(tags) == len(near.Tags) {
			return nil, nil // already known as is
		}
		m.ID = protocol.Ptr(near.ID)
		m.Tags, m.Importance = tags, protocol.Ptr(importance)
		act.Action = protocol.MemoryActionActionUpdate
		return act, nil
	}
	m.ID = protocol.Ptr(protocol.NewID("amem"))
	return act, nil
}

// sourceInfo is where an extracted memory comes from: the conversation, the
// user message and the answer, the model that proposed it, the
// memory_extraction version when one served, and when.
func (a *App) sourceInfo(turn store.Turn, promptVersion string) protocol.MemoryActionMemorySourceInfo {
	info := protocol.MemoryActionMemorySourceInfo{
		"conversationId": turn.ConversationID,
		"messageIds":     []any{turn.PromptID, turn.AnswerID},
		"extractedAt":    time.Now().UnixMilli(),
	}
	if m, ok := a.Extractor.(interface{ Model() string }); ok && m.Model() != "" {
		info["model"] = m.Model()
	}
	if promptVersion != "" {
		info["promptVersion"] = promptVersion
	}
	return info
}

// mergeCandidates folds candidates of one answer that are near-duplicates of
// an earlier one into it (tags merged, importance the higher).
func (a *App) mergeCandidates(cands []models.Candidate, vecs [][]float32) ([]models.Candidate, [][]float32) {
	var outC []models.Candidate
	var outV [][]float32
next:
	for i, c := range cands {
		for j := range outC {
			if cosine(outV[j], vecs[i]) >= a.Settings.DuplicateThreshold {
				outC[j].Tags = unionTags(outC[j].Tags, c.Tags)
				outC[j].Importance = max(outC[j].Importance, c.Importance)
				continue next
			}
		}
		outC = append(outC, c)
		outV = append(outV, vecs[i])
	}
	return outC, outV
}

// unionTags is a's tags followed by b's not already there.
func unionTags(a, b []string) []string {
	out := slices.Clone(a)
	if out == nil {
		out = []string{}
	}
	for _, t := range b {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}
