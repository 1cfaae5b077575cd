package api

import (
	"context"
	"net/http"
	"net/url"

	"github.com/alicia-voice/alicia/pkg/restapi"
)

// PromptVersion is a version of a prompt component with its record.
type PromptVersion = restapi.PromptVersion

// ListPromptVersions lists the versions of component in scope (mine or
// installation), newest first.
func (c *Client) ListPromptVersions(ctx context.Context, component, scope string) ([]PromptVersion, error) {
	q := url.Values{"component": {component}}
	if scope != "" {
		q.Set("scope", scope)
	}
	var out restapi.PromptVersionList
	if err := c.do(ctx, http.MethodGet, "/v1/prompt-versions", q, nil, &out); err != nil {
		return nil, err
	}
	return out.Versions, nil
}

// PromotePromptVersion makes version id serve new conversations: all of
// them (share nil) or that share.
func (c *Client) PromotePromptVersion(ctx context.Context, id string, share *float64) (PromptVersion, error) {
	var out PromptVersion
	err := c.do(ctx, http.MethodPost, "/v1/prompt-versions/"+url.PathEscape(id)+"/promote", nil, restapi.PromptPromote{RolloutShare: share}, &out)
	return out, err
}

// RollbackPromptVersion undoes the last promotion of component in scope
// and returns the scope's version serving now ("" for none).
func (c *Client) RollbackPromptVersion(ctx context.Context, component, scope string) (string, error) {
	in := restapi.PromptRollback{Component: component}
	if scope != "" {
		in.Scope = &scope
	}
	var out restapi.PromptRolledBack
	if err := c.do(ctx, http.MethodPost, "/v1/prompt-versions/rollback", nil, in, &out); err != nil {
		return "", err
	}
	if out.Serving == nil {
		return "", nil
	}
	return *out.Serving, nil
}
