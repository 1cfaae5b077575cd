package persistence_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
)

var optimizeTables = []string{"prompt_optimization_runs", "prompt_candidates", "prompt_evaluations",
	"alicia_dimension_preferences", "alicia_learning_consents"}

// optimizeSnapshot is every row of the optimiser's tables as JSON, in a stable order.
func optimizeSnapshot(t *testing.T, s *stack) string {
	t.Helper()
	var out []string
	for _, table := range optimizeTables {
		// Table names come from the constant list above, never from input.
		rows, err := s.pool.Query(context.Background(), fmt.Sprintf(`SELECT to_jsonb(t)::text FROM %s t ORDER BY to_jsonb(t)::text`, table))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var r string
			if err := rows.Scan(&r); err != nil {
				t.Fatal(err)
			}
			out = append(out, table+" "+r)
		}
		rows.Close()
	}
	return strings.Join(out, "\n")
}

// runState reads a run as "status iteration=N started=bool finished=bool".
func runState(t *testing.T, s *stack, id string) string {
	t.Helper()
	var status string
	var iteration *int
	var started, finished bool
	if err := s.pool.QueryRow(context.Background(), `SELECT status, (progress->>'iteration')::int, started_at IS NOT NULL, finished_at IS NOT NULL
		FROM prompt_optimization_runs WHERE id = $1`, id).Scan(&status, &iteration, &started, &finished); err != nil {
		t.Fatalf("run %s: %v", id, err)
	}
	it := "-"
	if iteration != nil {
		it = fmt.Sprint(*iteration)
	}
	return fmt.Sprintf("%s iteration=%s started=%t finished=%t", status, it, started, finished)
}

// front reads a run's candidates as "id=on_front", sorted.
func front(t *testing.T, s *stack, run string) string {
	t.Helper()
	rows, err := s.pool.Query(context.Background(), `SELECT id || '=' || on_front FROM prompt_candidates WHERE run_id = $1 ORDER BY id`, run)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return strings.Join(out, " ")
}

func report(run string, status protocol.EliteOptionsStatus, iteration int32, elites ...protocol.Elite) *protocol.EliteOptions {
	return &protocol.EliteOptions{RunID: run, Status: status, Budget: 100, Iteration: iteration, MetricCalls: 10 * iteration,
		FrontSize: int32(len(elites)), BestScores: map[string]float64{"correctness": 0.1 * float64(iteration)}, Elites: elites}
}

// elite is candidate id with one evaluation per message and an example on the first.
func elite(id string, weighted float64, messages ...string) protocol.Elite {
	e := protocol.Elite{CandidateID: id, Components: protocol.EliteComponents{"system": "be brief (" + id + ")"},
		Scores: protocol.EliteScores{"correctness": weighted}, Weighted: &weighted, BestOn: ptr(int32(len(messages)))}
	for i, m := range messages {
		e.Evaluations = append(e.Evaluations, protocol.Evaluation{MessageID: m, Scores: protocol.EvaluationScores{"correctness": weighted},
			Answer: ptr(id + " answers " + m)})
		if i == 0 {
			e.Examples = append(e.Examples, protocol.Example{MessageID: m, Question: "how far?", Current: "far, far away", Candidate: "3 km"})
		}
	}
	return e
}

func userRun(id, user string) *protocol.OptimizationRun {
	return &protocol.OptimizationRun{ID: id, Scope: protocol.OptimizationRunScopeUser, UserID: user, Budget: 100,
		Weights: protocol.OptimizationRunWeights{"correctness": 1, "brevity": 0.5}, CreatedAt: 1_700_000_000_000}
}

var asUser1 = map[string]any{"alicia.user_id": "user-1"}

// TestOptimizationRunLife walks a run from queued through running reports to
// done: its progress, its candidates and which are on the latest front,
// their per-example evaluations and example answers; a late report after
// the end changes nothing, and a replay of the whole SYSTEM stream (offsets
// forgotten) leaves every row as it was.
func TestOptimizationRunLife(t *testing.T) {
	s := newStack(t)
	s.start()
	ctx := context.Background()
	step := func(body protocol.Body, want string) {
		t.Helper()
		s.applied(bus.StreamSystem, s.system(body, asUser1))
		if got := runState(t, s, "or_life"); got != want {
			t.Fatalf("after %T: run %s, want %s", body, got, want)
		}
	}
	step(userRun("or_life", "user-1"), "queued iteration=- started=false finished=false")
	var components []string
	var weights string
	if err := s.pool.QueryRow(ctx, `SELECT components, weights::text FROM prompt_optimization_runs WHERE id = 'or_life'`).Scan(&components, &weights); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(components, []string{"system", "voice_style"}) || weights != `{"brevity": 0.5, "correctness": 1}` {
		t.Fatalf("components %v weights %s, want the defaults [system voice_style] and the run's weights", components, weights)
	}

	step(report("or_life", protocol.EliteOptionsStatusRunning, 0), "running iteration=0 started=true finished=false")
	step(report("or_life", protocol.EliteOptionsStatusRunning, 1, elite("pc_a", 0.6, "am_1", "am_2"), elite("pc_b", 0.5, "am_1")),
		"running iteration=1 started=true finished=false")
	if got := front(t, s, "or_life"); got != "pc_a=true pc_b=true" {
		t.Fatalf("front after iteration 1: %s", got)
	}
	// The same report redelivered changes nothing.
	running := optimizeSnapshot(t, s)
	step(report("or_life", protocol.EliteOptionsStatusRunning, 1, elite("pc_a", 0.6, "am_1", "am_2"), elite("pc_b", 0.5, "am_1")),
		"running iteration=1 started=true finished=false")
	if got := optimizeSnapshot(t, s); got != running {
		t.Fatalf("a redelivered report changed rows:\nbefore %s\nafter  %s", running, got)
	}
	// An older report (iteration 0, with a front) arriving late takes
	// neither the progress nor the front back.
	step(report("or_life", protocol.EliteOptionsStatusRunning, 0, elite("pc_old", 0.1, "am_1")), "running iteration=1 started=true finished=false")
	if got := front(t, s, "or_life"); got != "pc_a=true pc_b=true" {
		t.Fatalf("front after a late older report: %s", got)
	}
	step(report("or_life", protocol.EliteOptionsStatusDone, 2, elite("pc_b", 0.5, "am_1"), elite("pc_c", 0.8, "am_1", "am_2")),
		"done iteration=2 started=true finished=true")
	if got := front(t, s, "or_life"); got != "pc_a=false pc_b=true pc_c=true" {
		t.Fatalf("front when done: %s, want pc_a off the front", got)
	}
	if n := s.queryInt(`SELECT count(*) FROM prompt_evaluations`); n != 5 {
		t.Fatalf("%d evaluations, want 5 (pc_a 2, pc_b 1, pc_c 2)", n)
	}
	var answer, question string
	var score float32
	var bestOn int
	if err := s.pool.QueryRow(ctx, `SELECT e.answer, c.examples->0->>'question', c.score, c.best_on
		FROM prompt_evaluations e JOIN prompt_candidates c ON c.id = e.candidate_id
		WHERE e.candidate_id = 'pc_c' AND e.message_id = 'am_2'`).Scan(&answer, &question, &score, &bestOn); err != nil {
		t.Fatal(err)
	}
	if answer != "pc_c answers am_2" || question != "how far?" || score != 0.8 || bestOn != 2 {
		t.Fatalf("pc_c: answer %q, example question %q, score %g, best on %d", answer, question, score, bestOn)
	}
	if n := s.queryInt(`SELECT count(*) FROM prompt_optimization_runs WHERE progress @> '{"metricCalls": 20, "frontSize": 2, "bestScores": {"correctness": 0.2}}'`); n != 1 {
		t.Fatalf("the run's progress is not the last report's")
	}

	done := optimizeSnapshot(t, s)
	// A late running report (and its elites) does not revive the run.
	step(report("or_life", protocol.EliteOptionsStatusRunning, 3, elite("pc_d", 0.9, "am_1")), "done iteration=2 started=true finished=true")
	if got := optimizeSnapshot(t, s); got != done {
		t.Fatalf("a report after the end changed rows:\nbefore %s\nafter  %s", done, got)
	}

	// Replay: every envelope again, in stream order, from the start.
	last := s.system(report("or_life", protocol.EliteOptionsStatusDone, 2, elite("pc_b", 0.5, "am_1"), elite("pc_c", 0.8, "am_1", "am_2")), asUser1)
	s.applied(bus.StreamSystem, last)
	s.stop()
	if _, err := s.pool.Exec(ctx, `DELETE FROM alicia_stream_offsets`); err != nil {
		t.Fatal(err)
	}
	s.start()
	s.applied(bus.StreamSystem, last)
	if got := optimizeSnapshot(t, s); got != done {
		t.Fatalf("the replay changed rows:\nbefore %s\nafter  %s", done, got)
	}
}

// TestOptimizationRunEnds: a run cancelled before it started has no start
// and never runs after; a cancel older than the stored progress ends the run
// without taking its progress back; a failure keeps its reason.
func TestOptimizationRunEnds(t *testing.T) {
	s := newStack(t)
	s.start()
	for _, id := range []string{"or_c1", "or_c2", "or_f"} {
		s.system(userRun(id, "user-1"), asUser1)
	}
	bodies := []protocol.Body{
		report("or_c1", protocol.EliteOptionsStatusCancelled, 0),
		report("or_c1", protocol.EliteOptionsStatusRunning, 1, elite("pc_late", 0.9, "am_1")),
		report("or_c2", protocol.EliteOptionsStatusRunning, 2, elite("pc_c2", 0.4, "am_1")),
		report("or_c2", protocol.EliteOptionsStatusCancelled, 0),
		report("or_c2", protocol.EliteOptionsStatusRunning, 3),
		report("or_f", protocol.EliteOptionsStatusRunning, 1),
	}
	fail := report("or_f", protocol.EliteOptionsStatusFailed, 1)
	fail.Error = ptr("the judge model is unreachable")
	bodies = append(bodies, fail, report("or_f", protocol.EliteOptionsStatusDone, 2))
	var last uint64
	for _, b := range bodies {
		last = s.system(b, nil)
	}
	s.applied(bus.StreamSystem, last)
	for id, want := range map[string]string{
		"or_c1": "cancelled iteration=0 started=false finished=true",
		"or_c2": "cancelled iteration=2 started=true finished=true",
		"or_f":  "failed iteration=1 started=true finished=true",
	} {
		if got := runState(t, s, id); got != want {
			t.Errorf("run %s: %s, want %s", id, got, want)
		}
	}
	if got := front(t, s, "or_c1"); got != "" {
		t.Errorf("a cancelled run got candidates from a late report: %s", got)
	}
	if n := s.queryInt(`SELECT count(*) FROM prompt_optimization_runs WHERE id = 'or_f' AND error = 'the judge model is unreachable'`); n != 1 {
		t.Errorf("the failed run lost its reason")
	}
}

// TestDimensionPreferences: every preference is kept; the latest of a scope
// is the installation's whoever set it, and a person's by their user id.
func TestDimensionPreferences(t *testing.T) {
	s := newStack(t)
	s.start()
	pref := func(id string, scope protocol.DimensionPreferenceScope, ts int64, correctness float64) *protocol.DimensionPreference {
		return &protocol.DimensionPreference{ID: id, Scope: scope, Timestamp: ts, Weights: protocol.Weights{Correctness: &correctness}}
	}
	user, inst := protocol.DimensionPreferenceScopeUser, protocol.DimensionPreferenceScopeInstallation
	by := func(u string) map[string]any { return map[string]any{"alicia.user_id": u} }
	s.system(pref("dp_1", user, 1000, 0.1), by("user-1"))
	s.system(pref("dp_2", user, 2000, 0.2), by("user-1"))
	s.system(pref("dp_3", user, 3000, 0.3), by("user-2"))
	s.system(pref("dp_4", inst, 1500, 0.4), by("admin-1"))
	s.system(pref("dp_5", inst, 2500, 0.5), by("admin-2"))
	last := s.system(pref("dp_2", user, 2000, 0.2), by("user-1")) // redelivered
	s.applied(bus.StreamSystem, last)
	if n := s.queryInt(`SELECT count(*) FROM alicia_dimension_preferences`); n != 5 {
		t.Fatalf("%d preferences, want 5 (a redelivery adds none)", n)
	}
	latest := func(q string, args ...any) string {
		t.Helper()
		var id, w string
		if err := s.pool.QueryRow(context.Background(), q, args...).Scan(&id, &w); err != nil {
			t.Fatal(err)
		}
		return id + " " + w
	}
	if got := latest(`SELECT id, weights::text FROM alicia_dimension_preferences WHERE scope = 'user' AND user_id = $1
		ORDER BY created_at DESC, id DESC LIMIT 1`, "user-1"); got != `dp_2 {"correctness": 0.2}` {
		t.Errorf("user-1's latest: %s", got)
	}
	if got := latest(`SELECT id, user_id FROM alicia_dimension_preferences WHERE scope = 'installation'
		ORDER BY created_at DESC, id DESC LIMIT 1`); got != "dp_5 admin-2" {
		t.Errorf("the installation's latest: %s, want admin-2's dp_5", got)
	}
}

// TestEliteSelect: a promotion is recorded on its candidate with who, when,
// the selection and the versions made; a second selection keeps the first
// record; a selection whose version was not stored records nothing, so the
// candidate can be promoted again.
func TestEliteSelect(t *testing.T) {
	s := newStack(t)
	s.start()
	s.system(userRun("or_sel", "user-1"), asUser1)
	s.system(report("or_sel", protocol.EliteOptionsStatusDone, 1, elite("pc_a", 0.7, "am_1"), elite("pc_b", 0.6, "am_1")), nil)
	user := "user-1"
	s.system(&protocol.PromptVersion{ID: "pv_a", Component: "system", Version: 2, Text: "be brief (pc_a)", UserID: &user,
		Status: protocol.PromptVersionStatusActive, CreatedBy: "run:or_sel", CreatedAt: 1_700_000_000_000}, asUser1)
	sel := func(id, cand string, ts int64) *protocol.EliteSelect {
		return &protocol.EliteSelect{ID: id, RunID: "or_sel", CandidateID: cand, Timestamp: ts}
	}
	meta := func(u, versions string) map[string]any {
		return map[string]any{"alicia.user_id": u, "alicia.prompt_version_ids": versions}
	}
	s.system(sel("es_1", "pc_a", 1_700_000_100_000), meta("user-1", "pv_a"))
	s.system(sel("es_2", "pc_a", 1_700_000_200_000), meta("user-2", "pv_a"))
	last := s.system(sel("es_3", "pc_b", 1_700_000_300_000), meta("user-1", "pv_gone"))
	s.applied(bus.StreamSystem, last)
	var selection, by string
	var at time.Time
	var versions []string
	if err := s.pool.QueryRow(context.Background(), `SELECT selection_id, selected_by, selected_at, prompt_version_ids
		FROM prompt_candidates WHERE id = 'pc_a'`).Scan(&selection, &by, &at, &versions); err != nil {
		t.Fatal(err)
	}
	if selection != "es_1" || by != "user-1" || at.UnixMilli() != 1_700_000_100_000 || !slices.Equal(versions, []string{"pv_a"}) {
		t.Fatalf("pc_a selected %s by %s at %v with %v, want es_1 by user-1 with [pv_a]", selection, by, at, versions)
	}
	if n := s.queryInt(`SELECT count(*) FROM prompt_candidates WHERE id = 'pc_b' AND selected_at IS NULL AND prompt_version_ids IS NULL`); n != 1 {
		t.Fatalf("a selection whose version was not stored was recorded")
	}
}

// TestLearningConsent: a person's latest choice holds; an older one
// replayed after it changes nothing.
func TestLearningConsent(t *testing.T) {
	s := newStack(t)
	s.start()
	consent := func(share bool, ts int64) *protocol.LearningConsent {
		return &protocol.LearningConsent{UserID: "user-1", Share: share, Timestamp: ts}
	}
	share := func() string {
		t.Helper()
		var b bool
		if err := s.pool.QueryRow(context.Background(), `SELECT share FROM alicia_learning_consents WHERE user_id = 'user-1'`).Scan(&b); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(b)
	}
	s.applied(bus.StreamSystem, s.system(consent(true, 2000), asUser1))
	s.applied(bus.StreamSystem, s.system(consent(false, 1000), asUser1))
	if got := share(); got != "true" {
		t.Fatalf("an older choice replayed overrode the newer: share %s", got)
	}
	s.applied(bus.StreamSystem, s.system(consent(false, 3000), asUser1))
	if got := share(); got != "false" {
		t.Fatalf("the newest choice did not hold: share %s", got)
	}
}

// TestBadOptimizationEnvelopesAreDeadLettered: bad optimiser records are
// dead-lettered with the reason, and nothing else is lost.
func TestBadOptimizationEnvelopesAreDeadLettered(t *testing.T) {
	s := newStack(t)
	s.start()
	badScope := userRun("or_scope", "user-1")
	badScope.Scope = "team"
	negative := userRun("or_negative", "user-1")
	negative.Budget = -5
	cases := []struct {
		name   string
		body   protocol.Body
		meta   map[string]any
		reason string
	}{
		{"report of an unknown run", report("or_nowhere", protocol.EliteOptionsStatusRunning, 1), nil, "optimisation run or_nowhere"},
		// The schema check at decoding refuses these two first (protocol error 103).
		{"bad scope", badScope, asUser1, `scope: value "team" is not one of`},
		{"negative budget", negative, asUser1, "budget: minimum: got -5"},
		{"preference without its setter", &protocol.DimensionPreference{ID: "dp_x", Scope: protocol.DimensionPreferenceScopeUser}, nil, "who set it"},
		{"selection of an unknown candidate", &protocol.EliteSelect{ID: "es_x", RunID: "or_ok", CandidateID: "pc_nowhere"},
			map[string]any{"alicia.user_id": "user-1", "alicia.prompt_version_ids": "pv_a"}, "candidate pc_nowhere of optimisation run or_ok"},
		{"consent for someone else", &protocol.LearningConsent{UserID: "user-2", Share: true}, asUser1, "only the person may choose"},
	}
	s.system(userRun("or_ok", "user-1"), asUser1)
	for _, c := range cases {
		s.system(c.body, c.meta)
	}
	// On a conversation subject, even a valid run is no record.
	onConv := s.server("ac_opt", userRun("or_conv", "user-1"), asUser1)
	last := s.system(report("or_ok", protocol.EliteOptionsStatusRunning, 1, elite("pc_ok", 0.5, "am_1")), nil)
	s.applied(bus.StreamSystem, last)
	s.applied(bus.StreamConversations, onConv)
	if got := runState(t, s, "or_ok"); got != "running iteration=1 started=true finished=false" {
		t.Fatalf("the valid run: %s", got)
	}
	if n := s.queryInt(`SELECT count(*) FROM prompt_optimization_runs`); n != 1 {
		t.Fatalf("%d runs stored, want only or_ok", n)
	}
	if got := front(t, s, "or_ok"); got != "pc_ok=true" {
		t.Fatalf("the valid report's candidates: %s", got)
	}
	if n := s.queryInt(`SELECT count(*) FROM alicia_dimension_preferences`) + s.queryInt(`SELECT count(*) FROM alicia_learning_consents`); n != 0 {
		t.Fatalf("%d bad preferences or consents stored", n)
	}
	dlq, err := s.js.OrderedConsumer(context.Background(), bus.StreamDeadLetter, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subjects.DeadLetter(s.cfg.Consumer)}})
	if err != nil {
		t.Fatal(err)
	}
	// The two streams' dead letters interleave: match them by reason.
	var reasons []string
	for range len(cases) + 1 {
		m, err := dlq.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatalf("dead letter %d of %d: %v (have %q)", len(reasons)+1, len(cases)+1, err, reasons)
		}
		reasons = append(reasons, m.Headers().Get(bus.HeaderDLQSubject)+": "+m.Headers().Get(bus.HeaderDLQReason))
	}
	for _, c := range append(cases, struct {
		name   string
		body   protocol.Body
		meta   map[string]any
		reason string
	}{"run on a conversation subject", nil, nil, "belongs on alicia.sys"}) {
		t.Run(c.name, func(t *testing.T) {
			if !slices.ContainsFunc(reasons, func(r string) bool { return strings.Contains(r, c.reason) }) {
				t.Errorf("no dead letter says %q: %q", c.reason, reasons)
			}
		})
	}
}
