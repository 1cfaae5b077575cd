package prompts

import (
	"context"
	"fmt"
	"time"

	"github.com/alicia-voice/alicia/pkg/promptver"
	"github.com/alicia-voice/alicia/pkg/protocol"
)

// Publisher sends a PromptVersion on alicia.sys.prompt_version.
type Publisher = promptver.Publisher

// Seed publishes, for every component with a seed text, that text as a
// version (createdBy seed, active) unless an installation-wide version of
// the component already has it: version 1 of a component without any,
// and the next version when the seed text changed (an operator set
// ALICIA_LLM_SYSTEM_PROMPT, an upgrade rewrote a tool's description), so
// the new text serves once. The id is derived from component and text
// and is the message's Nats-Msg-Id, so replicas starting together publish
// it once. installation are the installation-wide versions, every status.
func Seed(ctx context.Context, seeds map[string]string, installation []Version, publish Publisher, now time.Time) (published int, err error) {
	type known struct {
		texts map[string]bool
		last  int32
	}
	by := map[string]*known{}
	for _, v := range installation {
		k := by[v.Component]
		if k == nil {
			k = &known{texts: map[string]bool{}}
			by[v.Component] = k
		}
		k.texts[v.Text] = true
		k.last = max(k.last, v.Version)
	}
	for component, text := range seeds {
		k := by[component]
		if k != nil && k.texts[text] {
			continue
		}
		next := int32(1)
		if k != nil {
			next = k.last + 1
		}
		id := SeedID(component, text)
		v := Version{ID: id, Component: component, Text: text, Version: next, Status: protocol.PromptVersionStatusActive,
			Share: 1, CreatedBy: "seed", CreatedAt: now}
		if err := publish(ctx, v.Protocol(), id); err != nil {
			return published, fmt.Errorf("prompts: seed %s: %w", component, err)
		}
		published++
	}
	return published, nil
}
