package llm_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
)

// titledModels answers title requests with a title of what was asked, and
// every other request with a plain answer.
func titledModels(t *testing.T) *fakeopenai.Server {
	return fakeopenai.New(t, fakeopenai.WithResponder(func(r fakeopenai.Request) fakeopenai.Turn {
		if len(r.Messages) > 0 && strings.HasPrefix(r.Messages[0].Content, "You name conversations") {
			if strings.Contains(r.Messages[0].Content, "KEEP") {
				return fakeopenai.Text("KEEP")
			}
			if strings.Contains(r.LastUser(), "Paris") {
				return fakeopenai.Text("\"Weather in Paris.\"")
			}
			return fakeopenai.Text("Title: Kitchen timers")
		}
		return fakeopenai.Text("It will be sunny tomorrow.")
	}))
}

// TestTitles: after the first answer a conversation without a title gets
// one from its content (shown to the open clients as a ConversationUpdate
// and stored as generated); a client's placeholder is replaced the same
// way; a title the person set is never replaced, even when a revisit is
// due; a generated title the model keeps stays.
func TestTitles(t *testing.T) {
	h := newHarness(t)
	models := titledModels(t)
	cfg := h.config(models)
	cfg.Titles = true
	h.replica(cfg)
	title := func(cid string) (string, string) {
		var text, source string
		if err := h.pool.QueryRow(context.Background(), `SELECT title, title_source FROM alicia_conversations WHERE id = $1`, cid).Scan(&text, &source); err != nil {
			t.Fatal(err)
		}
		return text, source
	}

	cid := h.conversation()
	w := h.watch(cid)
	w.answered(t, h.say(cid, "What is the weather in Paris tomorrow?"))
	envs := w.until(t, 20*time.Second, "a title", func(envs []seen) bool { return len(bodies[*protocol.ConversationUpdate](envs)) == 1 })
	if u := bodies[*protocol.ConversationUpdate](envs)[0]; u.Title == nil || *u.Title != "Weather in Paris" {
		t.Fatalf("title update %+v", u)
	}
	testkit.Eventually(t, 10*time.Second, func() bool { text, src := title(cid); return text == "Weather in Paris" && src == "generated" }, "the title stored")

	// A client's placeholder gives way.
	placeholder := h.conversation()
	env := protocol.New(placeholder, &protocol.ConversationUpdate{ConversationID: placeholder, Title: protocol.Ptr("Set a timer for ten"), UpdatedAt: 1})
	env.Meta = map[string]any{protocol.MetaTitleSource: protocol.TitleProvisional}
	if _, err := h.pub.PublishServer(context.Background(), env, ""); err != nil {
		t.Fatal(err)
	}
	pw := h.watch(placeholder)
	pw.answered(t, h.say(placeholder, "Set a timer for ten minutes"))
	testkit.Eventually(t, 20*time.Second, func() bool { text, src := title(placeholder); return text == "Kitchen timers" && src == "generated" }, "the placeholder replaced")

	// The person renames the first: kept through the revisit after the
	// fourth answer.
	rename := protocol.New(cid, &protocol.ConversationUpdate{ConversationID: cid, Title: protocol.Ptr("My trip"), UpdatedAt: 2})
	if _, err := h.pub.PublishServer(context.Background(), rename, ""); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"And the day after?", "Should I take an umbrella?", "What about Lyon?"} {
		w.answered(t, h.say(cid, q))
	}
	// Every answer's end has been looked at: the fifth's too.
	w.answered(t, h.say(cid, "Thanks."))
	text, src := title(cid)
	if text != "My trip" || src != "person" {
		t.Fatalf("after the revisit: %q (%s), want the person's", text, src)
	}
	var asked int
	for _, r := range models.Requests() {
		if len(r.Messages) > 0 && strings.HasPrefix(r.Messages[0].Content, "You name conversations") {
			asked++
		}
	}
	if asked != 2 {
		t.Fatalf("%d title requests, want 2 (one per conversation; none for the person's title)", asked)
	}
}
