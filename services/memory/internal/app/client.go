package app

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/memory/internal/store"
)

// ClientAction completes a MemoryAction a client sent in a conversation,
// stored at stream sequence seq. Persistence stores the client's action as
// sent, without an embedding; once it has, this embeds the content of a
// create or update and publishes the same action with the embedding on
// alicia.sys.memory_action, then confirms with a MemoryConfirmation on the
// conversation. A failure is confirmed with success false after an
// ErrorMessage giving the reason. lastAttempt says the message will not be
// redelivered: a failure to reach persistence is then confirmed as a
// failure instead of retried.
func (a *App) ClientAction(ctx context.Context, env protocol.Envelope, act *protocol.MemoryAction, seq uint64, lastAttempt bool) error {
	cid := env.ConversationID
	userID, _ := env.Meta[MetaUserID].(string)
	id := memoryID(act)
	log := a.Log.With().Str("conversation_id", cid).Str("memory_id", id).Str("action", string(act.Action)).Logger()

	fail := func(code int32, msg string) error {
		log.Warn().Int32("code", code).Str("reason", msg).Msg("client memory action failed")
		return a.confirm(ctx, cid, act, id, &protocol.ErrorMessage{
			ID: protocol.NewID("aerr"), ConversationID: cid, Code: code, Message: msg,
			Severity: 2, Recoverable: true, OriginatingID: protocol.Ptr(act.ID),
		})
	}
	if act.Action == protocol.MemoryActionActionRate {
		// Persistence stores no rating outside 1..5 (the schema refuses it
		// at the edge); say why nothing changed.
		if err := checkRating(act.Memory); err != nil {
			return fail(protocol.CodeInvalidBody, "the rating must be a whole number from 1 to 5 (memory.userRating)")
		}
	}
	if err := a.Applied(ctx, bus.StreamConversations, seq); err != nil {
		if lastAttempt {
			return fail(protocol.CodeBackendUnavailable, "the memory action was not stored in time")
		}
		return fmt.Errorf("wait for persistence: %w", err)
	}
	if env.StanzaID > 0 {
		a.applied(userID, bus.ClientMsgID(cid, env.StanzaID)) // the edge's message id of a client's envelope
	}
	row, err := a.Memories.Get(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fail(protocol.CodeNotFound, "memory not found")
	case err != nil:
		if lastAttempt {
			return fail(protocol.CodeInternal, "the memory could not be read")
		}
		return storeErr(err)
	case userID == "" || row.UserID != userID:
		return fail(protocol.CodeNotFound, "memory not found")
	case row.Deleted && act.Action != protocol.MemoryActionActionDelete:
		return fail(protocol.CodeNotFound, "memory not found")
	}
	embed := (act.Action == protocol.MemoryActionActionCreate || act.Action == protocol.MemoryActionActionUpdate) &&
		a.Embedder != nil && act.Memory != nil &&
		// A later update already changed the content: it brings its own embedding.
		row.Content == act.Memory.Content
	if embed && strings.TrimSpace(row.Content) != "" {
		m := *act.Memory
		m.ID = &id
		if m.Source == nil {
			m.Source = protocol.Ptr(SourceUser)
		}
		if err := a.fillEmbedding(ctx, &m); err != nil {
			if ctx.Err() != nil {
				return err
			}
			log.Warn().Err(err).Msg("embedding a client's memory failed")
			return fail(protocol.CodeBackendUnavailable, "the embeddings backend is unavailable; the memory is saved but cannot be found by search until it is updated")
		}
		withEmbedding := *act
		withEmbedding.Memory = &m
		if err := a.publishAction(ctx, userID, withEmbedding, act.ID+":embedding"); err != nil {
			if ctx.Err() != nil || !lastAttempt {
				return err
			}
			return fail(protocol.CodeBackendUnavailable, "the memory's embedding was not stored in time")
		}
	}
	return a.confirm(ctx, cid, act, id, nil)
}

// confirm publishes errMsg (when not nil) and then the MemoryConfirmation
// of act on conversation cid; message ids derived from the action's id make
// a redelivered action confirm once.
func (a *App) confirm(ctx context.Context, cid string, act *protocol.MemoryAction, id string, errMsg *protocol.ErrorMessage) error {
	if errMsg != nil {
		if _, err := a.Publisher.PublishServer(ctx, protocol.New(cid, errMsg), cid+":memory_error:"+act.ID); err != nil {
			return err
		}
	}
	conf := &protocol.MemoryConfirmation{MemoryID: id, Action: protocol.MemoryConfirmationAction(act.Action), Success: errMsg == nil}
	_, err := a.Publisher.PublishServer(ctx, protocol.New(cid, conf), cid+":memory_confirmation:"+act.ID)
	return err
}
