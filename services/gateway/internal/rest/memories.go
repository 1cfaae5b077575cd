package rest

import (
	"github.com/alicia-voice/alicia/pkg/restapi"

	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
	"github.com/alicia-voice/alicia/services/gateway/internal/auth"
	"github.com/alicia-voice/alicia/services/gateway/internal/store"
)

// listMemories lists (newest first, pinned before) or, with ?q=, searches
// semantically through the memory service.
func (a *API) listMemories(c echo.Context) error {
	user, ctx := auth.UserOf(c), c.Request().Context()
	if q := c.QueryParam("q"); q != "" {
		if err := text("q", q, maxQuery, true); err != nil {
			return err
		}
		k, err := limitParam(c, defaultSearchK, maxSearchK)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, a.WriteTimeout)
		defer cancel()
		resp, err := rpc.MemorySearch(ctx, a.NC, rpc.MemorySearchRequest{UserID: user, Query: q, TopK: k})
		if err != nil {
			return dependency(err, "memory")
		}
		if !resp.Enabled {
			return fail(http.StatusServiceUnavailable, "memory search is off: no embeddings backend is configured (ALICIA_EMBEDDING_URL)")
		}
		mems := resp.Memories
		if mems == nil {
			mems = []rpc.Memory{}
		}
		for i := range mems {
			if mems[i].Tags == nil {
				mems[i].Tags = []string{}
			}
		}
		return c.JSON(http.StatusOK, restapi.MemoryPage{Memories: memoriesOf(mems)})
	}
	limit, err := limitParam(c, defaultLimit, maxLimit)
	if err != nil {
		return err
	}
	after, err := store.DecodeCursor(c.QueryParam("cursor"))
	if err != nil {
		return fail(http.StatusBadRequest, "cursor is not one this server handed out")
	}
	archived := false
	switch s := c.QueryParam("archived"); s {
	case "", "false":
	case "true":
		archived = true
	default:
		return fail(http.StatusBadRequest, "archived must be true or false")
	}
	mems, next, err := a.Store.Memories(ctx, store.ListMemories{User: user, IncludeArchived: archived, Limit: limit, After: after})
	if err != nil {
		return err
	}
	page := restapi.MemoryPage{Memories: memoriesOf(mems)}
	if next != nil {
		page.NextCursor = next.Encode()
	}
	return c.JSON(http.StatusOK, page)
}

// validMemory checks a memory's create (POST) or change (PATCH).
func validMemory(in restapi.MemoryInput, create bool, maxChars int) error {
	if create || in.Content != nil {
		s := ""
		if in.Content != nil {
			s = *in.Content
		}
		if err := budgetText(edge.BudgetMemory, "content", s, maxChars, true); err != nil {
			return err
		}
	}
	if len(in.Tags) > maxTags {
		return fail(http.StatusBadRequest, "at most %d tags", maxTags)
	}
	for _, t := range in.Tags {
		if err := text("a tag", t, maxTag, true); err != nil {
			return err
		}
	}
	if in.Importance != nil && (*in.Importance < 0 || *in.Importance > 1) {
		return fail(http.StatusBadRequest, "importance must be between 0 and 1")
	}
	return nil
}

// act applies a memory action for the user through the memory service
// (which embeds the content and answers once persistence has applied it)
// and answers with the memory as stored.
func (a *API) act(c echo.Context, status int, action protocol.MemoryActionAction, mem *protocol.MemoryActionMemory) error {
	user := auth.UserOf(c)
	ctx, cancel := context.WithTimeout(c.Request().Context(), a.WriteTimeout)
	defer cancel()
	req := rpc.MemoryActionRequest{UserID: user, Action: protocol.MemoryAction{ID: protocol.NewID("amact"), Action: action,
		Memory: mem, Timestamp: time.Now().UnixMilli()}}
	resp, err := rpc.MemoryAct(ctx, a.NC, req)
	if err != nil {
		return dependency(err, "memory")
	}
	if status == http.StatusNoContent {
		return c.NoContent(status)
	}
	id := resp.MemoryID
	if id == "" {
		id = *mem.ID
	}
	stored, err := a.Store.Memory(c.Request().Context(), user, id)
	if err != nil {
		return lookup(err, "memory")
	}
	return c.JSON(status, memoryOf(stored))
}

func (a *API) createMemory(c echo.Context) error {
	var in restapi.MemoryInput
	if err := bindJSON(c, &in, false); err != nil {
		return err
	}
	if err := validMemory(in, true, a.budgets().MemoryChars); err != nil {
		return err
	}
	if err := a.admitStored(c, len(*in.Content)); err != nil {
		return err
	}
	tags := in.Tags
	if tags == nil {
		tags = []string{}
	}
	return a.act(c, http.StatusCreated, protocol.MemoryActionActionCreate, &protocol.MemoryActionMemory{
		ID: protocol.Ptr(protocol.NewID("amem")), Content: *in.Content, Tags: tags, Importance: in.Importance,
		Pinned: in.Pinned, Source: protocol.Ptr("api")})
}

// memory reads the path's memory after the ownership check.
func (a *API) memory(c echo.Context) (rpc.Memory, error) {
	id, err := pathID(c, "id")
	if err != nil {
		return rpc.Memory{}, err
	}
	m, err := a.Store.Memory(c.Request().Context(), auth.UserOf(c), id)
	if err != nil {
		return rpc.Memory{}, lookup(err, "memory")
	}
	return m, nil
}

// patchMemory sends the whole memory with the changes applied: an update
// replaces content and tags.
func (a *API) patchMemory(c echo.Context) error {
	var in restapi.MemoryInput
	if err := bindJSON(c, &in, false); err != nil {
		return err
	}
	if in.Pinned != nil {
		return fail(http.StatusBadRequest, "pin a memory with POST /v1/memories/{id}/pin")
	}
	if in.Content == nil && in.Tags == nil && in.Importance == nil {
		return fail(http.StatusBadRequest, "give content, tags or importance")
	}
	if err := validMemory(in, false, a.budgets().MemoryChars); err != nil {
		return err
	}
	m, err := a.memory(c)
	if err != nil {
		return err
	}
	upd := &protocol.MemoryActionMemory{ID: &m.ID, Content: m.Content, Tags: m.Tags, Importance: &m.Importance}
	if in.Content != nil {
		upd.Content = *in.Content
	}
	if in.Tags != nil {
		upd.Tags = in.Tags
	}
	if in.Importance != nil {
		upd.Importance = in.Importance
	}
	return a.act(c, http.StatusOK, protocol.MemoryActionActionUpdate, upd)
}

// simple applies an action that only names the memory.
func (a *API) simple(c echo.Context, status int, action protocol.MemoryActionAction) error {
	m, err := a.memory(c)
	if err != nil {
		return err
	}
	return a.act(c, status, action, &protocol.MemoryActionMemory{ID: &m.ID, Content: m.Content})
}

func (a *API) deleteMemory(c echo.Context) error {
	return a.simple(c, http.StatusNoContent, protocol.MemoryActionActionDelete)
}

func (a *API) pinMemory(c echo.Context) error {
	return a.simple(c, http.StatusOK, protocol.MemoryActionActionPin)
}

// rateMemory sets the person's 1..5 rating of their memory.
func (a *API) rateMemory(c echo.Context) error {
	var in restapi.MemoryRating
	if err := bindJSON(c, &in, false); err != nil {
		return err
	}
	if in.Rating < 1 || in.Rating > 5 {
		return fail(http.StatusBadRequest, "rating must be a whole number from 1 to 5")
	}
	m, err := a.memory(c)
	if err != nil {
		return err
	}
	return a.act(c, http.StatusOK, protocol.MemoryActionActionRate, &protocol.MemoryActionMemory{ID: &m.ID, UserRating: &in.Rating})
}

func (a *API) archiveMemory(c echo.Context) error {
	return a.simple(c, http.StatusOK, protocol.MemoryActionActionArchive)
}

// memoryUses lists the answers that used the path's memory (the owner's
// only), newest first.
func (a *API) memoryUses(c echo.Context) error {
	limit, err := limitParam(c, defaultLimit, maxLimit)
	if err != nil {
		return err
	}
	after, err := store.DecodeCursor(c.QueryParam("cursor"))
	if err != nil {
		return fail(http.StatusBadRequest, "cursor is not one this server handed out")
	}
	m, err := a.memory(c)
	if err != nil {
		return err
	}
	uses, next, err := a.Store.MemoryUses(c.Request().Context(), store.ListMemoryUses{User: auth.UserOf(c), MemoryID: m.ID, Limit: limit, After: after})
	if err != nil {
		return err
	}
	page := restapi.MemoryUsePage{Uses: make([]restapi.MemoryUse, len(uses))}
	for i, u := range uses {
		page.Uses[i] = restapi.MemoryUse{MessageID: u.MessageID, ConversationID: u.ConversationID, ConversationTitle: u.ConversationTitle,
			Excerpt: u.Excerpt, Similarity: u.Similarity, CreatedAt: u.CreatedAt}
	}
	if next != nil {
		page.NextCursor = next.Encode()
	}
	return c.JSON(http.StatusOK, page)
}

// memoryOf is a memory as the API answers it (the memory service's and
// the store's rpc.Memory carry the same fields).
func memoryOf(m rpc.Memory) restapi.Memory {
	out := restapi.Memory{ID: m.ID, Content: m.Content, Tags: m.Tags, Importance: m.Importance, Pinned: m.Pinned,
		Archived: m.Archived, Similarity: m.Similarity, CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt,
		UserRating: m.UserRating, CreatedBy: m.CreatedBy}
	if len(m.SourceInfo) > 0 {
		out.SourceInfo = &m.SourceInfo
	}
	return out
}

func memoriesOf(ms []rpc.Memory) []restapi.Memory {
	out := make([]restapi.Memory, len(ms))
	for i, m := range ms {
		out[i] = memoryOf(m)
	}
	return out
}
