package llm_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/fakeopenai"
	"github.com/alicia-voice/alicia/pkg/promptver"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/llm"
	"github.com/alicia-voice/alicia/services/llm/internal/prompts"
)

// seedComponents are what the test toolbox's llm seeds: system,
// voice_style, demonstrations and the three built-in tools.
var seedComponents = []string{"demonstrations", "system", "tool:broken", "tool:calculator", "tool:sleepy", "voice_style"}

var (
	systemSeed = prompts.SeedID(prompts.System, llm.DefaultSystemPrompt)
	voiceSeed  = prompts.SeedID(prompts.VoiceStyle, llm.DefaultVoiceStyle)
)

// waitSeeded waits until persistence stored the seeds.
func (h *harness) waitSeeded(t *testing.T) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, func() bool {
		var n int
		_ = h.pool.QueryRow(context.Background(), `SELECT count(*) FROM alicia_prompt_versions WHERE created_by = 'seed' AND status = 'active'`).Scan(&n)
		return n == len(seedComponents)
	}, "seed versions stored")
}

// versionStatus waits until version id has status (and share, 1 for the whole).
func (h *harness) versionStatus(t *testing.T, id string, status protocol.PromptVersionStatus) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, func() bool {
		var got string
		_ = h.pool.QueryRow(context.Background(), `SELECT status FROM alicia_prompt_versions WHERE id = $1`, id).Scan(&got)
		return got == string(status)
	}, "version %s %s", id, status)
}

// propose publishes a candidate version of component (user "": installation-wide).
func (h *harness) propose(t *testing.T, id, component string, version int32, user, text string) {
	t.Helper()
	pv := &protocol.PromptVersion{ID: id, Component: component, Version: version, Text: text,
		Status: protocol.PromptVersionStatusCandidate, CreatedBy: "run:test", CreatedAt: time.Now().UnixMilli()}
	if user != "" {
		pv.UserID = &user
	}
	if _, err := h.pub.PublishSystem(context.Background(), protocol.New("", pv), ""); err != nil {
		t.Fatal(err)
	}
	h.versionStatus(t, id, protocol.PromptVersionStatusCandidate)
}

// sayAs sends a user message of user in conversation cid.
func (h *harness) sayAs(cid, user, text string) string {
	h.t.Helper()
	h.mu.Lock()
	h.stanzas[cid]++
	stanza := h.stanzas[cid]
	h.mu.Unlock()
	id := protocol.NewID("am")
	if _, err := h.pub.PublishClient(context.Background(), protocol.Envelope{StanzaID: stanza, ConversationID: cid, Type: protocol.TypeUserMessage,
		Meta: map[string]any{edge.MetaUserID: user}, Body: &protocol.UserMessage{ID: id, ConversationID: cid, Content: text}}); err != nil {
		h.t.Fatal(err)
	}
	return id
}

// systemFor is the system message of the model request that asked text.
func (h *harness) systemFor(t *testing.T, text string) string {
	t.Helper()
	var sys string
	testkit.Eventually(t, 10*time.Second, func() bool {
		for _, r := range h.fake.Requests() {
			if r.LastUser() == text && len(r.Messages) > 0 && r.Messages[0].Role == "system" {
				sys = r.Messages[0].Content
				return true
			}
		}
		return false
	}, "model request for %q", text)
	return sys
}

// turnWith asks text in conversation cid as user and returns the answer's
// StartAnswer and the system prompt the model was given.
func (h *harness) turnWith(t *testing.T, w *watcher, cid, user, text string) (*protocol.StartAnswer, string) {
	t.Helper()
	h.fake.Enqueue(fakeopenai.Turn{Text: []string{"Fine."}})
	uid := h.sayAs(cid, user, text)
	sa, _, _ := w.answered(t, uid)
	return sa, h.systemFor(t, text)
}

// Two replicas starting together publish each seed once (the id is the
// Nats-Msg-Id), and persistence stores one version 1 per component.
func TestPromptSeedsOnceAcrossReplicas(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(h.fake)
	for range 2 {
		testkit.Go(t, "llm", func(ctx context.Context) error { return llm.Run(ctx, cfg, testkit.Log()) })
	}
	h.waitSeeded(t)
	rows, err := h.pool.Query(context.Background(), `SELECT component FROM alicia_prompt_versions WHERE version = 1 ORDER BY component`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		got = append(got, c)
	}
	if !slices.Equal(got, seedComponents) {
		t.Fatalf("seed versions %v, want %v", got, seedComponents)
	}
	sys, err := h.js.Stream(context.Background(), bus.StreamSystem)
	if err != nil {
		t.Fatal(err)
	}
	subject := subjects.System(protocol.TypePromptVersion)
	info, err := sys.Info(context.Background(), jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects[subject]; n != uint64(len(seedComponents)) {
		t.Fatalf("%d PromptVersions published by two replicas, want %d (one per seed)", n, len(seedComponents))
	}
	// A restart with the same texts publishes nothing.
	h.replica(cfg)()
	info, _ = sys.Info(context.Background(), jetstream.WithSubjectFilter(subject))
	if n := info.State.Subjects[subject]; n != uint64(len(seedComponents)) {
		t.Fatalf("%d PromptVersions after a restart, want %d", n, len(seedComponents))
	}
}

// A promoted version is used by new turns (its text in the model request),
// named in StartAnswer.promptVersions and on the answer's row; rollback
// serves the previous one again; spoken answers add the voice style.
func TestPromoteAndRollback(t *testing.T) {
	h := newHarness(t)
	h.replica(h.config(h.fake))
	h.waitSeeded(t)
	admin := &promptver.Admin{Store: promptver.NewReader(h.pool), Publish: func(ctx context.Context, v *protocol.PromptVersion, msgID string) error {
		_, err := h.pub.PublishSystem(ctx, protocol.New("", v), msgID)
		return err
	}}
	boss := promptver.Actor{UserID: "admin", Admin: true}
	cid := h.conversation()
	w := h.watch(cid)

	sa, sys := h.turnWith(t, w, cid, testUser, "first question")
	if !strings.HasPrefix(sys, llm.DefaultSystemPrompt) || strings.Contains(sys, llm.DefaultVoiceStyle) {
		t.Fatalf("a text answer's system prompt %q: want the seed without the voice style", sys)
	}
	if !slices.Contains(sa.PromptVersions, systemSeed) || slices.Contains(sa.PromptVersions, voiceSeed) ||
		!slices.Contains(sa.PromptVersions, prompts.SeedID("tool:calculator", "Evaluates an arithmetic expression.")) {
		t.Fatalf("promptVersions %v: want the system and tool seeds, no voice style", sa.PromptVersions)
	}

	h.propose(t, "pv_brief", prompts.System, 2, "", "BRIEF: answer in one sentence.")
	if _, err := admin.Promote(context.Background(), promptver.Actor{UserID: testUser}, "pv_brief", nil); !errors.Is(err, promptver.ErrForbidden) {
		t.Fatalf("a person promoting an installation-wide version: %v, want ErrForbidden", err)
	}
	if _, err := admin.Promote(context.Background(), boss, "pv_brief", nil); err != nil {
		t.Fatal(err)
	}
	h.versionStatus(t, systemSeed, protocol.PromptVersionStatusRetired)
	sa, sys = h.turnWith(t, w, cid, testUser, "second question")
	if !strings.HasPrefix(sys, "BRIEF: answer in one sentence.") {
		t.Fatalf("after promotion the system prompt is %q", sys)
	}
	if !slices.Contains(sa.PromptVersions, "pv_brief") || slices.Contains(sa.PromptVersions, systemSeed) {
		t.Fatalf("promptVersions %v: want pv_brief, not the seed", sa.PromptVersions)
	}
	h.row(t, sa.ID, func(row) bool { return true })
	var stored []string
	testkit.Eventually(t, 10*time.Second, func() bool {
		_ = h.pool.QueryRow(context.Background(), `SELECT prompt_versions FROM alicia_messages WHERE id = $1`, sa.ID).Scan(&stored)
		return slices.Contains(stored, "pv_brief")
	}, "prompt_versions on the row")
	h.client(cid, &protocol.Feedback{ID: protocol.NewID("af"), ConversationID: cid, MessageID: sa.ID, TargetID: sa.ID,
		TargetType: protocol.FeedbackTargetTypeMessage, Vote: protocol.FeedbackVoteUp, Timestamp: time.Now().UnixMilli()})
	testkit.Eventually(t, 10*time.Second, func() bool {
		ls, err := admin.List(context.Background(), boss, prompts.System, "")
		return err == nil && len(ls) == 2 && ls[0].ID == "pv_brief" && ls[0].Answers == 1 && ls[0].Up == 1 && ls[0].Rate() == 1 && ls[1].Answers == 1
	}, "pv_brief listed with its answer and up vote")

	restored, err := admin.Rollback(context.Background(), boss, prompts.System, "")
	if err != nil || restored != systemSeed {
		t.Fatalf("rollback: %q, %v; want the seed back", restored, err)
	}
	h.versionStatus(t, "pv_brief", protocol.PromptVersionStatusRetired)
	h.versionStatus(t, systemSeed, protocol.PromptVersionStatusActive)
	sa, sys = h.turnWith(t, w, cid, testUser, "third question")
	if !strings.HasPrefix(sys, llm.DefaultSystemPrompt) || !slices.Contains(sa.PromptVersions, systemSeed) {
		t.Fatalf("after rollback: system %q, versions %v", sys, sa.PromptVersions)
	}

	spoken := h.conversation(protocol.ConfigurationFeaturesElemStreaming, protocol.ConfigurationFeaturesElemAudioOutput)
	sw := h.watch(spoken)
	sa, sys = h.turnWith(t, sw, spoken, testUser, "spoken question")
	if !strings.Contains(sys, llm.DefaultSystemPrompt+"\n\n"+llm.DefaultVoiceStyle) || !slices.Contains(sa.PromptVersions, voiceSeed) {
		t.Fatalf("a spoken answer: system %q, versions %v; want the voice style", sys, sa.PromptVersions)
	}
}

// A person's version serves only their conversations, and only they (not
// even an administrator) may promote it.
func TestPersonalVersionStaysPersonal(t *testing.T) {
	h := newHarness(t)
	h.replica(h.config(h.fake))
	h.waitSeeded(t)
	admin := &promptver.Admin{Store: promptver.NewReader(h.pool), Publish: func(ctx context.Context, v *protocol.PromptVersion, msgID string) error {
		_, err := h.pub.PublishSystem(ctx, protocol.New("", v), msgID)
		return err
	}}
	h.propose(t, "pv_alice", prompts.System, 1, "alice", "ALICE: call me Al.")
	for _, who := range []promptver.Actor{{UserID: "bob"}, {UserID: "root", Admin: true}} {
		if _, err := admin.Promote(context.Background(), who, "pv_alice", nil); !errors.Is(err, promptver.ErrForbidden) {
			t.Fatalf("%+v promoting alice's version: %v, want ErrForbidden", who, err)
		}
	}
	if _, err := admin.Promote(context.Background(), promptver.Actor{UserID: "alice"}, "pv_alice", nil); err != nil {
		t.Fatal(err)
	}
	h.versionStatus(t, "pv_alice", protocol.PromptVersionStatusActive)
	for _, c := range []struct {
		user, prefix, version string
	}{{"alice", "ALICE: call me Al.", "pv_alice"}, {"bob", llm.DefaultSystemPrompt, systemSeed}} {
		cid := h.conversation()
		w := h.watch(cid)
		sa, sys := h.turnWith(t, w, cid, c.user, "who am I, "+c.user)
		if !strings.HasPrefix(sys, c.prefix) || !slices.Contains(sa.PromptVersions, c.version) {
			t.Fatalf("%s: system %q, versions %v; want %s", c.user, sys, sa.PromptVersions, c.version)
		}
		if c.user == "bob" && (strings.Contains(sys, "ALICE") || slices.Contains(sa.PromptVersions, "pv_alice")) {
			t.Fatalf("alice's version reached bob's turn")
		}
	}
	// Alice's rollback retires her only version: the installation's serves her again.
	if got, err := admin.Rollback(context.Background(), promptver.Actor{UserID: "alice"}, prompts.System, "alice"); err != nil || got != "" {
		t.Fatalf("alice's rollback: %q, %v", got, err)
	}
	h.versionStatus(t, "pv_alice", protocol.PromptVersionStatusRetired)
	cid := h.conversation()
	w := h.watch(cid)
	if _, sys := h.turnWith(t, w, cid, "alice", "after my rollback"); !strings.HasPrefix(sys, llm.DefaultSystemPrompt) {
		t.Fatalf("after alice's rollback her system prompt is %q", sys)
	}
}

// A version rolling out at 0.5 serves the conversations whose id falls
// below 0.5 (prompts.Share), the others keep the full version, and a
// conversation keeps its side from turn to turn.
func TestRolloutSplitsConversations(t *testing.T) {
	h := newHarness(t)
	h.replica(h.config(h.fake))
	h.waitSeeded(t)
	admin := &promptver.Admin{Store: promptver.NewReader(h.pool), Publish: func(ctx context.Context, v *protocol.PromptVersion, msgID string) error {
		_, err := h.pub.PublishSystem(ctx, protocol.New("", v), msgID)
		return err
	}}
	h.propose(t, "pv_half", prompts.System, 2, "", "HALF: a new way.")
	half := 0.5
	if _, err := admin.Promote(context.Background(), promptver.Actor{UserID: "root", Admin: true}, "pv_half", &half); err != nil {
		t.Fatal(err)
	}
	h.versionStatus(t, "pv_half", protocol.PromptVersionStatusActive)
	sides := map[bool]int{}
	for i := range 8 {
		cid := h.conversation()
		w := h.watch(cid)
		want, wantID := llm.DefaultSystemPrompt, systemSeed
		if prompts.Share(cid) < half {
			want, wantID = "HALF: a new way.", "pv_half"
		}
		sides[wantID == "pv_half"]++
		for turn := range 2 {
			text := "rollout " + string(rune('a'+i)) + string(rune('0'+turn))
			sa, sys := h.turnWith(t, w, cid, testUser, text)
			if !strings.HasPrefix(sys, want) || !slices.Contains(sa.PromptVersions, wantID) {
				t.Fatalf("conversation %s (share %.2f) turn %d: system %q, versions %v; want %s", cid, prompts.Share(cid), turn, sys, sa.PromptVersions, wantID)
			}
		}
	}
	t.Logf("conversations per side (rollout, full): %d, %d", sides[true], sides[false])
}
