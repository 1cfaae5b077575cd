package promptver

import (
	"context"
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// Record is one version of a component, as stored (alicia_prompt_versions).
type Record struct {
	ID, Component, Text string
	Version             int32
	UserID              string // "": installation-wide
	Status              protocol.PromptVersionStatus
	// Share of new conversations it serves while active (1: all).
	Share     float64
	ParentID  string
	CreatedBy string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// FromProtocol is p as a Record.
func FromProtocol(p *protocol.PromptVersion) Record {
	v := Record{ID: p.ID, Component: p.Component, Text: p.Text, Version: p.Version, Status: p.Status, Share: 1,
		CreatedBy: p.CreatedBy, CreatedAt: time.UnixMilli(p.CreatedAt)}
	if p.UserID != nil {
		v.UserID = *p.UserID
	}
	if p.ParentID != nil {
		v.ParentID = *p.ParentID
	}
	if p.RolloutShare != nil {
		v.Share = *p.RolloutShare
	}
	return v
}

// Protocol is v as a PromptVersion envelope body.
func (v Record) Protocol() *protocol.PromptVersion {
	p := &protocol.PromptVersion{ID: v.ID, Component: v.Component, Text: v.Text, Version: v.Version, Status: v.Status,
		CreatedBy: v.CreatedBy, CreatedAt: v.CreatedAt.UnixMilli()}
	if v.UserID != "" {
		p.UserID = protocol.Ptr(v.UserID)
	}
	if v.ParentID != "" {
		p.ParentID = protocol.Ptr(v.ParentID)
	}
	if v.Share < 1 {
		p.RolloutShare = protocol.Ptr(v.Share)
	}
	return p
}

// Publisher sends a PromptVersion on alicia.sys.prompt_version; msgID,
// when not "", is its Nats-Msg-Id (JetStream drops a duplicate).
type Publisher func(ctx context.Context, v *protocol.PromptVersion, msgID string) error
