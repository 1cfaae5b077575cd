package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// publishRegistration tells persistence which tools a source offers
// (ToolRegistration on alicia.sys.tool_registration), so they appear in
// alicia_tools. The same content is not published twice by one process, and
// the message id is derived from the content and the content this process
// published before for the source: a restart, or a second replica, that
// publishes the same list is de-duplicated by JetStream, while a list that
// changes back (A, B, A) is not mistaken for a duplicate.
func (r *Registry) publishRegistration(ctx context.Context, source, server string, specs []Spec) error {
	body := &protocol.ToolRegistration{Source: source, Tools: make([]protocol.ToolRegistrationToolsElem, 0, len(specs))}
	specs = slices.Clone(specs)
	slices.SortFunc(specs, func(a, b Spec) int { return strings.Compare(a.Name, b.Name) })
	for _, s := range specs {
		t := protocol.ToolRegistrationToolsElem{Name: s.Name, Parameters: s.Parameters}
		if s.Description != "" {
			t.Description = protocol.Ptr(s.Description)
		}
		if server != "" {
			t.MCPServer = protocol.Ptr(server)
		}
		body.Tools = append(body.Tools, t)
	}
	content, err := json.Marshal(body) // map keys sorted: the same list gives the same bytes
	if err != nil {
		return fmt.Errorf("tools: registration of %s: %w", source, err)
	}
	sum := sha256.Sum256(content)
	hash := hex.EncodeToString(sum[:])

	r.regMu.Lock()
	defer r.regMu.Unlock()
	prev := r.lastReg[source]
	if prev == hash {
		return nil
	}
	id := sha256.Sum256([]byte(prev + "\n" + hash))
	msgID := "tool_registration:" + source + ":" + hex.EncodeToString(id[:16])
	if _, err := r.pub.PublishSystem(ctx, protocol.New("", body), msgID); err != nil {
		return fmt.Errorf("tools: registration of %s: %w", source, err)
	}
	r.lastReg[source] = hash
	r.log.Info().Str("source", source).Int("tools", len(specs)).Msg("tools registered")
	return nil
}
