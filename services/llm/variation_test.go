package llm_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/protocol"
)

func branchUpdates(envs []seen) []*protocol.BranchUpdate { return bodies[*protocol.BranchUpdate](envs) }

// context renders the messages of the last model request after the system prompt.
func lastContext(f *fakeopenai.Server) []string {
	reqs := f.Requests()
	var out []string
	for _, m := range reqs[len(reqs)-1].Messages[1:] {
		out = append(out, m.Role+":"+m.Content)
	}
	return out
}

// Regenerate: a new answer to the same user message, a sibling of the old
// one, announced with BranchUpdate; the branch head moves to it.
func TestRegenerate(t *testing.T) {
	h := newHarness(t)
	h.replica(h.config(h.fake))
	cid := h.conversation()
	w := h.watch(cid)
	h.fake.Enqueue(fakeopenai.Text("First answer."), fakeopenai.Text("Second answer."))
	uid := h.say(cid, "tell me something")
	first, _, _ := w.answered(t, uid)
	h.row(t, first.ID, func(r row) bool { return r.status == "completed" })

	h.client(cid, &protocol.ControlVariation{ConversationID: cid, TargetID: first.ID, Mode: protocol.ControlVariationModeRegenerate})
	var second *protocol.StartAnswer
	envs := w.until(t, 10*time.Second, "regenerated answer and BranchUpdate", func(envs []seen) bool {
		for _, b := range bodies[*protocol.StartAnswer](envs) {
			if b.ID != first.ID {
				second = b
			}
		}
		return second != nil && finished(envs, second.ID) && len(branchUpdates(envs)) == 1
	})
	if second.PreviousID != uid {
		t.Fatalf("regenerated answer follows %s, want %s", second.PreviousID, uid)
	}
	bu := branchUpdates(envs)[0]
	if bu.ParentMessageID != uid || bu.NewSibling.ID != second.ID || bu.NewSibling.Content != "Second answer." ||
		!slices.Equal(bu.SiblingIds, []string{first.ID, second.ID}) || bu.NewSibling.CreatedAt == 0 {
		t.Fatalf("BranchUpdate %+v", bu)
	}
	if got := lastContext(h.fake); !slices.Equal(got, []string{"user:tell me something"}) {
		t.Fatalf("context %q: the old answer must not be in it", got)
	}
	h.row(t, second.ID, func(r row) bool { return r.status == "completed" && r.contents == "Second answer." })
	if tip := h.tip(cid); tip != second.ID {
		t.Fatalf("branch head %s, want %s", tip, second.ID)
	}
}

// Edit: a new user message, a sibling of the edited one with the new text,
// published on the server subject, then its answer; the head ends on it.
func TestEdit(t *testing.T) {
	h := newHarness(t)
	h.replica(h.config(h.fake))
	cid := h.conversation()
	w := h.watch(cid)
	h.fake.Enqueue(fakeopenai.Text("Hi."), fakeopenai.Text("Paris."), fakeopenai.Text("Rome."))
	u1 := h.say(cid, "hello")
	a1, _, _ := w.answered(t, u1)
	u2 := h.say(cid, "capital of France?")
	a2, _, _ := w.answered(t, u2)
	h.row(t, a2.ID, func(r row) bool { return r.status == "completed" })

	h.client(cid, &protocol.ControlVariation{ConversationID: cid, TargetID: u2, Mode: protocol.ControlVariationModeEdit, NewContent: protocol.Ptr("capital of Italy?")})
	var edited *protocol.UserMessage
	var a3 *protocol.StartAnswer
	envs := w.until(t, 10*time.Second, "edited message answered", func(envs []seen) bool {
		for _, s := range envs {
			if b, ok := s.Env.Body.(*protocol.UserMessage); ok && strings.Contains(s.Subject, ".server.") {
				edited = b
			}
		}
		if edited != nil {
			a3 = answerOf(envs, edited.ID)
		}
		return a3 != nil && finished(envs, a3.ID)
	})
	if edited.PreviousID == nil || *edited.PreviousID != a1.ID || edited.Content != "capital of Italy?" || edited.ID == u2 {
		t.Fatalf("edited message %+v", edited)
	}
	bu := branchUpdates(envs)
	if len(bu) != 1 || bu[0].ParentMessageID != a1.ID || bu[0].NewSibling.ID != edited.ID ||
		bu[0].NewSibling.Content != "capital of Italy?" || !slices.Equal(bu[0].SiblingIds, []string{u2, edited.ID}) {
		t.Fatalf("BranchUpdate %+v", bu)
	}
	if got := lastContext(h.fake); !slices.Equal(got, []string{"user:hello", "assistant:Hi.", "user:capital of Italy?"}) {
		t.Fatalf("context %q", got)
	}
	r := h.row(t, edited.ID, func(r row) bool { return r.role == "user" })
	if r.previous == nil || *r.previous != a1.ID || r.contents != "capital of Italy?" {
		t.Fatalf("edited row %+v", r)
	}
	h.row(t, a3.ID, func(r row) bool { return r.status == "completed" && r.contents == "Rome." })
	if tip := h.tip(cid); tip != a3.ID {
		t.Fatalf("branch head %s, want the new answer %s", tip, a3.ID)
	}
	// The next message continues the edited branch.
	h.fake.Enqueue(fakeopenai.Text("Yes."))
	u4 := h.say(cid, "sure?")
	w.answered(t, u4)
	if got := lastContext(h.fake); !slices.Equal(got, []string{"user:hello", "assistant:Hi.", "user:capital of Italy?", "assistant:Rome.", "user:sure?"}) {
		t.Fatalf("context after the edit %q", got)
	}
}

// Continue: a new sibling that starts with the old answer's text and goes on;
// the model is given the old text and asked to continue.
func TestContinue(t *testing.T) {
	h := newHarness(t)
	h.replica(h.config(h.fake))
	cid := h.conversation()
	w := h.watch(cid)
	h.fake.Enqueue(fakeopenai.Text("Once upon a time there was a fox."), fakeopenai.Text("It lived in a wood. The end."))
	uid := h.say(cid, "tell a story")
	first, _, _ := w.answered(t, uid)
	h.row(t, first.ID, func(r row) bool { return r.status == "completed" })

	h.client(cid, &protocol.ControlVariation{ConversationID: cid, TargetID: first.ID, Mode: protocol.ControlVariationModeContinue})
	var cont *protocol.StartAnswer
	envs := w.until(t, 10*time.Second, "continued answer", func(envs []seen) bool {
		for _, b := range bodies[*protocol.StartAnswer](envs) {
			if b.ID != first.ID {
				cont = b
			}
		}
		return cont != nil && finished(envs, cont.ID) && len(branchUpdates(envs)) == 1
	})
	var texts []string
	for _, s := range sentencesOf(envs, cont.ID) {
		texts = append(texts, s.Text)
	}
	if got := strings.Join(texts, "|"); got != "Once upon a time there was a fox.|It lived in a wood.|The end." {
		t.Fatalf("sentences %q", got)
	}
	ctx := lastContext(h.fake)
	if len(ctx) != 3 || ctx[0] != "user:tell a story" || ctx[1] != "assistant:Once upon a time there was a fox." || !strings.HasPrefix(ctx[2], "user:Continue") {
		t.Fatalf("context %q", ctx)
	}
	want := "Once upon a time there was a fox. It lived in a wood. The end."
	if bu := branchUpdates(envs)[0]; bu.ParentMessageID != uid || bu.NewSibling.ID != cont.ID || bu.NewSibling.Content != want {
		t.Fatalf("BranchUpdate %+v", bu)
	}
	h.row(t, cont.ID, func(r row) bool { return r.status == "completed" && r.contents == want })
}

// Variations of a message that is not there, or of the wrong kind, are
// refused with ErrorMessage 201/202 and the conversation goes on.
func TestVariationRefused(t *testing.T) {
	h := newHarness(t)
	h.replica(h.config(h.fake))
	cid := h.conversation()
	w := h.watch(cid)
	h.fake.Enqueue(fakeopenai.Text("Hi."))
	u1 := h.say(cid, "hello")
	a1, _, _ := w.answered(t, u1)
	h.row(t, a1.ID, func(r row) bool { return r.status == "completed" })
	cases := []struct {
		name string
		v    protocol.ControlVariation
		code int32
	}{
		{"unknown target", protocol.ControlVariation{TargetID: "am_nothere", Mode: protocol.ControlVariationModeRegenerate}, protocol.CodeNotFound},
		{"regenerate a user message", protocol.ControlVariation{TargetID: u1, Mode: protocol.ControlVariationModeRegenerate}, protocol.CodeInvalidState},
		{"continue a user message", protocol.ControlVariation{TargetID: u1, Mode: protocol.ControlVariationModeContinue}, protocol.CodeInvalidState},
		{"edit an answer", protocol.ControlVariation{TargetID: a1.ID, Mode: protocol.ControlVariationModeEdit, NewContent: protocol.Ptr("x")}, protocol.CodeInvalidState},
		{"edit without content", protocol.ControlVariation{TargetID: u1, Mode: protocol.ControlVariationModeEdit}, protocol.CodeInvalidState},
		{"edit the first message", protocol.ControlVariation{TargetID: u1, Mode: protocol.ControlVariationModeEdit, NewContent: protocol.Ptr("hey")}, protocol.CodeInvalidState},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := c.v
			v.ConversationID = cid
			h.client(cid, &v)
			envs := w.until(t, 10*time.Second, "ErrorMessage", func(envs []seen) bool { return len(bodies[*protocol.ErrorMessage](envs)) == i+1 })
			e := bodies[*protocol.ErrorMessage](envs)[i]
			if e.Code != c.code || !e.Recoverable || e.OriginatingID != nil {
				t.Fatalf("ErrorMessage %+v, want code %d", e, c.code)
			}
		})
	}
	if n := len(h.fake.Requests()); n != 1 {
		t.Fatalf("%d model requests, want only the first turn's", n)
	}
	h.fake.Enqueue(fakeopenai.Text("Still here."))
	w.answered(t, h.say(cid, "still there?"))
}
