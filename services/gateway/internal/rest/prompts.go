package rest

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/alicia-voice/alicia/pkg/promptver"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/restapi"
	"github.com/alicia-voice/alicia/services/gateway/internal/auth"
)

// Prompt versions (pkg/promptver): a person lists, promotes and rolls back
// their own versions; installation-wide ones are listed by everyone and
// changed by administrators. Nobody sees or changes another person's.
// Every change is a PromptVersion on alicia.sys, answered once
// persistence applied it (the llm replicas hear it at once).

// promptAdmin is promptver.Admin publishing through c's write.
func (a *API) promptAdmin(c echo.Context) *promptver.Admin {
	return &promptver.Admin{Store: a.Prompts, Publish: func(_ context.Context, v *protocol.PromptVersion, _ string) error {
		return a.write(c, asSystem(v))
	}}
}

func actor(c echo.Context) promptver.Actor {
	return promptver.Actor{UserID: auth.UserOf(c), Admin: auth.IsAdmin(c)}
}

// promptScope is the user id of a scope named mine ("" or absent) or
// installation ("").
func promptScope(c echo.Context, scope string) (string, error) {
	switch scope {
	case "", "mine":
		return auth.UserOf(c), nil
	case "installation":
		return "", nil
	}
	return "", fail(http.StatusBadRequest, "scope %q: use mine or installation", scope)
}

func validComponent(component string) error {
	switch {
	case component == promptver.System, component == promptver.VoiceStyle, component == promptver.MemoryExtraction,
		component == promptver.Demonstrations, strings.HasPrefix(component, promptver.ToolPrefix) && len(component) > len(promptver.ToolPrefix):
		if len(component) <= 128 {
			return nil
		}
	}
	return fail(http.StatusBadRequest, "component %q: use system, voice_style, memory_extraction, demonstrations or tool:<name>", component)
}

// promptErr answers promptver's errors.
func promptErr(err error) error {
	switch {
	case errors.Is(err, promptver.ErrNotFound):
		return fail(http.StatusNotFound, "prompt version not found")
	case errors.Is(err, promptver.ErrForbidden):
		return fail(http.StatusForbidden, "%s", strings.TrimPrefix(err.Error(), "promptver: "))
	case errors.Is(err, promptver.ErrNoPrevious):
		return fail(http.StatusNotFound, "%s", strings.TrimPrefix(err.Error(), "promptver: "))
	case errors.Is(err, promptver.ErrShare):
		return fail(http.StatusBadRequest, "rolloutShare must be between 0 and 1")
	}
	return err
}

func promptVersionOut(v promptver.Record, t promptver.Tally) restapi.PromptVersion {
	out := restapi.PromptVersion{ID: v.ID, Component: v.Component, Version: v.Version, Text: v.Text, Status: string(v.Status),
		CreatedBy: v.CreatedBy, CreatedAt: v.CreatedAt.UnixMilli(), UpdatedAt: v.UpdatedAt.UnixMilli(),
		Answers: t.Answers, UpVotes: t.Up, DownVotes: t.Down}
	if v.ParentID != "" {
		out.ParentID = &v.ParentID
	}
	if v.UserID != "" {
		out.UserID = &v.UserID
	}
	if v.Share < 1 {
		out.RolloutShare = &v.Share
	}
	if r, ok := t.RateInterval(); ok {
		out.UpVoteRate = interval(r)
	}
	if j := t.Judged; j.N > 0 {
		out.Judged = &restapi.JudgedScores{Count: j.N, Correctness: *interval(j.Correctness.Interval(j.N)),
			Faithfulness: *interval(j.Faithfulness.Interval(j.N)), Relevancy: *interval(j.Relevancy.Interval(j.N))}
	}
	return out
}

// interval is i rounded to three decimals, as the API shows it.
func interval(i promptver.Interval) *restapi.Interval {
	r := func(v float64) float64 { return math.Round(v*1000) / 1000 }
	return &restapi.Interval{Estimate: r(i.Estimate), Low: r(i.Low), High: r(i.High)}
}

func (a *API) listPromptVersions(c echo.Context) error {
	component := c.QueryParam("component")
	if err := validComponent(component); err != nil {
		return err
	}
	user, err := promptScope(c, c.QueryParam("scope"))
	if err != nil {
		return err
	}
	ls, err := a.promptAdmin(c).List(c.Request().Context(), actor(c), component, user)
	if err != nil {
		return promptErr(err)
	}
	out := restapi.PromptVersionList{Versions: make([]restapi.PromptVersion, len(ls))}
	for i, l := range ls {
		out.Versions[i] = promptVersionOut(l.Record, l.Tally)
	}
	return c.JSON(http.StatusOK, out)
}

func (a *API) promotePromptVersion(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	var in restapi.PromptPromote
	if err := bindJSON(c, &in, true); err != nil {
		return err
	}
	ctx := c.Request().Context()
	if _, err := a.promptAdmin(c).Promote(ctx, actor(c), id, in.RolloutShare); err != nil {
		return promptErr(err)
	}
	v, err := a.Prompts.Get(ctx, id)
	if err != nil {
		return promptErr(err)
	}
	tallies, err := a.Prompts.Votes(ctx, []string{id})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, promptVersionOut(v, tallies[id]))
}

func (a *API) rollbackPromptVersion(c echo.Context) error {
	var in restapi.PromptRollback
	if err := bindJSON(c, &in, false); err != nil {
		return err
	}
	if err := validComponent(in.Component); err != nil {
		return err
	}
	scope := ""
	if in.Scope != nil {
		scope = *in.Scope
	}
	user, err := promptScope(c, scope)
	if err != nil {
		return err
	}
	serving, err := a.promptAdmin(c).Rollback(c.Request().Context(), actor(c), in.Component, user)
	if err != nil {
		return promptErr(err)
	}
	out := restapi.PromptRolledBack{}
	if serving != "" {
		out.Serving = &serving
	}
	return c.JSON(http.StatusOK, out)
}
