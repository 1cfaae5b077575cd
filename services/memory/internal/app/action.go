package app

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/services/memory/internal/store"
)

// Act applies a MemoryAction for userID (memory.action, the REST API's
// writes): it checks the memory belongs to the user, embeds new content,
// publishes the action on alicia.sys.memory_action, waits until persistence
// has applied it and returns the memory as stored.
func (a *App) Act(ctx context.Context, userID string, act protocol.MemoryAction) (rpc.MemoryActionResponse, error) {
	if userID == "" {
		return rpc.MemoryActionResponse{}, fmt.Errorf("%w: userId is empty", ErrInvalid)
	}
	given := act.ID != ""
	if !given {
		act.ID = protocol.NewID("amact")
	}
	if act.Timestamp == 0 {
		act.Timestamp = time.Now().UnixMilli()
	}
	if act.Memory != nil {
		m := *act.Memory // never change the caller's memory
		act.Memory = &m
	}
	id := memoryID(&act)
	if act.Action == protocol.MemoryActionActionCreate && (act.Memory == nil || act.Memory.ID == nil || *act.Memory.ID == "") {
		id = protocol.NewID("amem")
		if given {
			// A retried request (same action id) names the same memory.
			id = derivedID("amem", userID, act.ID)
		}
	}
	existing, err := a.Memories.Get(ctx, id)
	found := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return rpc.MemoryActionResponse{}, storeErr(err)
	}
	owned := found && existing.UserID == userID && !existing.Deleted

	switch act.Action {
	case protocol.MemoryActionActionCreate:
		if act.Memory == nil {
			return rpc.MemoryActionResponse{}, fmt.Errorf("%w: create needs a memory", ErrInvalid)
		}
		if found && !owned {
			return rpc.MemoryActionResponse{}, fmt.Errorf("%w: memory id %s is taken", ErrInvalid, id)
		}
		// The same create again (a retry) is answered with the memory; a
		// different one under the same id is a mistake, not an update.
		if found && existing.Content != strings.TrimSpace(act.Memory.Content) {
			return rpc.MemoryActionResponse{}, fmt.Errorf("%w: memory %s exists with other content; update it instead", ErrInvalid, id)
		}
	case protocol.MemoryActionActionUpdate:
		if !owned {
			return rpc.MemoryActionResponse{}, fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		if act.Memory == nil {
			return rpc.MemoryActionResponse{}, fmt.Errorf("%w: update needs a memory", ErrInvalid)
		}
		// Persistence replaces content and tags: keep what the caller left out.
		if strings.TrimSpace(act.Memory.Content) == "" {
			act.Memory.Content = existing.Content
		}
		if act.Memory.Tags == nil {
			act.Memory.Tags = existing.Tags
		}
	case protocol.MemoryActionActionRate:
		if !owned {
			return rpc.MemoryActionResponse{}, fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		if err := checkRating(act.Memory); err != nil {
			return rpc.MemoryActionResponse{}, err
		}
		// Only the rating travels: persistence sets user_rating alone.
		act.Memory = &protocol.MemoryActionMemory{UserRating: act.Memory.UserRating}
	case protocol.MemoryActionActionDelete, protocol.MemoryActionActionPin, protocol.MemoryActionActionArchive:
		if !owned {
			return rpc.MemoryActionResponse{}, fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		if act.Memory == nil {
			act.Memory = &protocol.MemoryActionMemory{}
		}
	default:
		return rpc.MemoryActionResponse{}, fmt.Errorf("%w: unknown action %q", ErrInvalid, act.Action)
	}
	act.Memory.ID = &id
	if err := checkMemory(act.Action, act.Memory); err != nil {
		return rpc.MemoryActionResponse{}, err
	}
	if act.Action == protocol.MemoryActionActionCreate || act.Action == protocol.MemoryActionActionUpdate {
		if act.Memory.Source == nil {
			act.Memory.Source = protocol.Ptr(SourceAPI)
		}
		if err := a.fillEmbedding(ctx, act.Memory); err != nil {
			return rpc.MemoryActionResponse{}, err
		}
	}
	if err := a.publishAction(ctx, userID, act, act.ID); err != nil {
		return rpc.MemoryActionResponse{}, err
	}
	m, err := a.Memories.Get(ctx, id)
	if err != nil {
		return rpc.MemoryActionResponse{}, fmt.Errorf("read back memory %s: %w", id, storeErr(err))
	}
	return rpc.MemoryActionResponse{MemoryID: id, Memory: m.Memory}, nil
}

// memoryID is the memory an action is about, as persistence reads it:
// memory.id, else the action's id.
func memoryID(act *protocol.MemoryAction) string {
	if act.Memory != nil && act.Memory.ID != nil && *act.Memory.ID != "" {
		return *act.Memory.ID
	}
	return act.ID
}

// derivedID is prefix_ followed by 20 base62 characters of a hash of parts.
func derivedID(prefix string, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	sum := h.Sum(nil)
	b := make([]byte, 0, len(prefix)+21)
	b = append(b, prefix...)
	b = append(b, '_')
	for _, c := range sum[:20] {
		b = append(b, alphabet[int(c)%len(alphabet)])
	}
	return string(b)
}

// checkRating reports a rate without a rating from 1 to 5.
func checkRating(m *protocol.MemoryActionMemory) error {
	if m == nil || m.UserRating == nil {
		return fmt.Errorf("%w: rate needs memory.userRating, a whole number from 1 to 5", ErrInvalid)
	}
	if r := *m.UserRating; r < 1 || r > 5 {
		return fmt.Errorf("%w: rating %d is outside 1..5", ErrInvalid, r)
	}
	return nil
}

// checkMemory validates the fields persistence would reject.
func checkMemory(action protocol.MemoryActionAction, m *protocol.MemoryActionMemory) error {
	if action == protocol.MemoryActionActionCreate || action == protocol.MemoryActionActionUpdate {
		m.Content = strings.TrimSpace(m.Content)
		if m.Content == "" {
			return fmt.Errorf("%w: memory content is empty", ErrInvalid)
		}
		if n := len([]rune(m.Content)); n > MaxContent {
			return fmt.Errorf("%w: memory content has %d characters, at most %d", ErrInvalid, n, MaxContent)
		}
	}
	for name, v := range map[string]*float64{"importance": m.Importance, "confidence": m.Confidence} {
		if v != nil && (math.IsNaN(*v) || *v < 0 || *v > 1) {
			return fmt.Errorf("%w: %s %g is outside 0..1", ErrInvalid, name, *v)
		}
	}
	return nil
}

// fillEmbedding embeds m's content when an embeddings backend is configured.
func (a *App) fillEmbedding(ctx context.Context, m *protocol.MemoryActionMemory) error {
	if a.Embedder == nil {
		m.Embedding, m.EmbeddingModel = nil, nil
		return nil
	}
	vecs, err := a.embed(ctx, m.Content)
	if err != nil {
		return err
	}
	m.Embedding = float64s(vecs[0])
	m.EmbeddingModel = protocol.Ptr(a.Embedder.Model())
	return nil
}

// publishAction puts act on alicia.sys.memory_action for userID and waits
// until persistence has applied it.
func (a *App) publishAction(ctx context.Context, userID string, act protocol.MemoryAction, msgID string) error {
	env := protocol.Envelope{Type: protocol.TypeMemoryAction, Meta: map[string]any{MetaUserID: userID}, Body: &act}
	ack, err := a.Publisher.PublishSystem(ctx, env, msgID)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if err := a.Applied(ctx, bus.StreamSystem, ack.Sequence); err != nil {
		return fmt.Errorf("%w: persistence has not applied the memory action: %w", ErrUnavailable, err)
	}
	a.applied(userID, msgID)
	return nil
}
