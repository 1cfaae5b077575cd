package turn

import (
	"context"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"github.com/alicia-voice/alicia/services/llm/internal/demos"
	"github.com/alicia-voice/alicia/services/llm/internal/prompts"
)

// composed is what the prompt versions serving a turn make of it: the
// system text (with the voice style when the answer is spoken), the tools
// with their descriptions, and the ids of the versions used (StartAnswer
// promptVersions).
type composed struct {
	system string
	tools  []openai.Tool
	ids    []string
}

// compose chooses the versions serving conversation cid of user
// (internal/prompts) from the catalog in memory: no round trip. ds are the
// turn's demonstrations: shown after the instructions, introduced by the
// demonstrations component, whose version is named only when there are
// some.
func (e *Engine) compose(ctx context.Context, cid, user string, spoken bool, ds []demos.Demo) composed {
	ch := e.d.Prompts.For(cid, user)
	var c composed
	text, id, _ := ch.Text(prompts.System)
	c.system = text
	c.ids = appendID(c.ids, id)
	if spoken {
		if v, vid, ok := ch.Text(prompts.VoiceStyle); ok && strings.TrimSpace(v) != "" {
			c.system += "\n\n" + v
			c.ids = appendID(c.ids, vid)
		}
	}
	if len(ds) > 0 {
		if intro, did, ok := ch.Text(prompts.Demonstrations); ok && strings.TrimSpace(intro) != "" {
			c.system += "\n\n" + demonstrationsBlock(intro, ds)
			c.ids = appendID(c.ids, did)
		}
	}
	if e.d.Toolbox == nil {
		return c
	}
	specs := e.d.Toolbox.Available(ctx)
	for i := range specs {
		desc, tid := ch.ToolText(specs[i].Name, specs[i].Description)
		specs[i].Description = desc
		if e.s.MaxToolIterations > 0 {
			c.ids = appendID(c.ids, tid)
		}
	}
	c.tools = toolDefinitions(specs)
	return c
}

func appendID(ids []string, id string) []string {
	if id == "" {
		return ids
	}
	return append(ids, id)
}
