package llm_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/services/llm"
	"github.com/alicia-voice/alicia/services/llm/internal/metrics"
	"github.com/alicia-voice/alicia/services/llm/internal/prompts"
)

var demoSeed = prompts.SeedID(prompts.Demonstrations, llm.DefaultDemonstrations)

// rated stores an earlier conversation of user, as persistence would have
// it: each turn's question and answer, with a vote ("up", "down", "") and a
// judged mean (0: not judged).
func (h *harness) rated(t *testing.T, user string, turns ...ratedTurn) {
	t.Helper()
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := h.pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	cid := protocol.NewID("ac")
	exec(`INSERT INTO alicia_conversations (id, user_id) VALUES ($1, $2)`, cid, user)
	var prev any
	for i, tr := range turns {
		qid, aid := protocol.NewID("am"), protocol.NewID("am")
		exec(`INSERT INTO alicia_messages (id, conversation_id, previous_id, sequence_number, message_role, contents) VALUES ($1, $2, $3, $4, 'user', $5)`,
			qid, cid, prev, 2*i+1, tr.q)
		exec(`INSERT INTO alicia_messages (id, conversation_id, previous_id, sequence_number, message_role, contents) VALUES ($1, $2, $3, $4, 'assistant', $5)`,
			aid, cid, qid, 2*i+2, tr.a)
		if tr.vote != "" {
			exec(`INSERT INTO alicia_votes (conversation_id, message_id, target_type, target_id, vote, user_id) VALUES ($1, $2, 'message', $2, $3, $4)`,
				cid, aid, tr.vote, user)
		}
		if tr.judged > 0 {
			exec(`INSERT INTO alicia_message_judgements (message_id, conversation_id, correctness, faithfulness, relevancy, judged_at)
				VALUES ($1, $2, $3, $3, $3, now())`, aid, cid, tr.judged)
		}
		prev = aid
	}
	exec(`UPDATE alicia_conversations SET tip_message_id = $2 WHERE id = $1`, cid, prev)
}

type ratedTurn struct {
	q, a, vote string
	judged     float64
}

// A person's earlier turns they rated well serve as examples in their new
// turns, introduced by the demonstrations component, whose version the
// answer then names; another person's turns and down-voted ones never do;
// k bounds them, 0 turns them off; a selector too slow or failing leaves
// the turn without them, and it is answered all the same.
func TestDemonstrations(t *testing.T) {
	h := newHarness(t)
	h.rated(t, testUser,
		ratedTurn{q: "How do I repot a fern?", a: "FERN-UP: use peat-free compost.", vote: "up"},
		ratedTurn{q: "How often should I water a fern?", a: "FERN-DOWN: every day.", vote: "down", judged: 0.95},
		ratedTurn{q: "What is the capital of Peru?", a: "PERU-JUDGED: Lima.", judged: 0.9},
		ratedTurn{q: "Which fern likes shade?", a: "FERN-MEH: most of them.", judged: 0.5},
	)
	h.rated(t, "user-2", ratedTurn{q: "How do I repot a fern quickly?", a: "FERN-OTHER: just do it.", vote: "up"})

	cfg := h.config(h.fake)
	// A budget a loaded test machine keeps within (the default 150ms is
	// BenchmarkSelect's business): only the lock below outlasts it.
	cfg.DemonstrationsTimeout = 2 * time.Second
	stop := h.replica(cfg)
	h.waitSeeded(t)
	cid := h.conversation()
	w := h.watch(cid)

	sa, sys := h.turnWith(t, w, cid, testUser, "When should I repot my fern?")
	fern, peru := strings.Index(sys, "FERN-UP"), strings.Index(sys, "PERU-JUDGED")
	if !strings.Contains(sys, llm.DefaultDemonstrations) || fern < 0 || peru < fern {
		t.Fatalf("system prompt without the introduced demonstrations (the similar up-voted one first, then the judged one):\n%s", sys)
	}
	if !strings.Contains(sys, "How do I repot a fern?") {
		t.Errorf("the demonstration's question is missing:\n%s", sys)
	}
	for _, never := range []string{"FERN-OTHER", "FERN-DOWN", "FERN-MEH"} {
		if strings.Contains(sys, never) {
			t.Errorf("%s (another person's, down-voted or judged low) is in the prompt:\n%s", never, sys)
		}
	}
	if !slices.Contains(sa.PromptVersions, demoSeed) || !slices.Contains(sa.PromptVersions, systemSeed) {
		t.Errorf("StartAnswer.promptVersions %v: want the system and demonstrations versions", sa.PromptVersions)
	}

	t.Run("a person without rated turns", func(t *testing.T) {
		other := h.conversation()
		ow := h.watch(other)
		sa, sys := h.turnWith(t, ow, other, "user-3", "When should I repot my fern, please?")
		if strings.Contains(sys, llm.DefaultDemonstrations) || strings.Contains(sys, "FERN-") {
			t.Errorf("user-3 was shown demonstrations:\n%s", sys)
		}
		if slices.Contains(sa.PromptVersions, demoSeed) {
			t.Errorf("promptVersions %v name the demonstrations none were shown", sa.PromptVersions)
		}
	})

	// Without them in time, or failing: the turn answers without, counted.
	without := func(t *testing.T, outcome, text string) {
		t.Helper()
		before := testutil.ToFloat64(metrics.Default().Demonstrations.WithLabelValues(outcome))
		sa, sys := h.turnWith(t, w, cid, testUser, text)
		if strings.Contains(sys, "FERN-UP") || slices.Contains(sa.PromptVersions, demoSeed) {
			t.Errorf("demonstrations used (versions %v):\n%s", sa.PromptVersions, sys)
		}
		if got := testutil.ToFloat64(metrics.Default().Demonstrations.WithLabelValues(outcome)); got <= before {
			t.Errorf("alicia_llm_demonstrations_total{outcome=%q} stayed at %v", outcome, got)
		}
	}
	t.Run("slow selector", func(t *testing.T) {
		// A lock on a table the selector reads: its query waits past the budget.
		tx, err := h.pool.BeginTx(context.Background(), pgx.TxOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(context.Background()) }()
		if _, err := tx.Exec(context.Background(), `LOCK TABLE alicia_message_judgements IN ACCESS EXCLUSIVE MODE`); err != nil {
			t.Fatal(err)
		}
		without(t, "timeout", "When should I repot my fern again?")
	})
	t.Run("failing selector", func(t *testing.T) {
		exec := func(sql string) {
			if _, err := h.pool.Exec(context.Background(), sql); err != nil {
				t.Fatal(err)
			}
		}
		exec(`ALTER TABLE alicia_message_judgements RENAME TO judgements_away`)
		defer exec(`ALTER TABLE judgements_away RENAME TO alicia_message_judgements`)
		without(t, "error", "When should I repot my fern, once more?")
	})
	stop()

	t.Run("k bounds the count", func(t *testing.T) {
		cfg := h.config(h.fake)
		cfg.Demonstrations, cfg.DemonstrationsTimeout = 1, 2*time.Second
		stop := h.replica(cfg)
		defer stop()
		_, sys := h.turnWith(t, w, cid, testUser, "Should I repot a fern in spring?")
		if !strings.Contains(sys, "FERN-UP") || strings.Contains(sys, "PERU-JUDGED") {
			t.Fatalf("k=1: want only the most similar:\n%s", sys)
		}
	})
	t.Run("zero turns them off", func(t *testing.T) {
		cfg := h.config(h.fake)
		cfg.Demonstrations = 0
		stop := h.replica(cfg)
		defer stop()
		sa, sys := h.turnWith(t, w, cid, testUser, "Can I repot a fern in winter?")
		if strings.Contains(sys, llm.DefaultDemonstrations) || strings.Contains(sys, "FERN-UP") || slices.Contains(sa.PromptVersions, demoSeed) {
			t.Fatalf("k=0: demonstrations shown (versions %v):\n%s", sa.PromptVersions, sys)
		}
	})
}
