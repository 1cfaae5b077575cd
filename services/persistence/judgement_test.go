package persistence_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
)

// TestTurnJudgements: a TurnJudgement on the agent subject becomes one row
// of alicia_message_judgements per answer — a redelivered one (the same
// envelope stored twice) and a later one for the same answer upsert that
// row — and the conversation's correctness, faithfulness and relevancy are
// the means over its judged answers. A judgement of a message that is not an
// answer writes nothing; one published on a client subject is dead-lettered.
func TestTurnJudgements(t *testing.T) {
	s := newStack(t)
	s.start()
	const cid = "ac_judged"
	f := publishFlow(s, cid)
	finishFlow(s, f)
	second := "am_answer2_" + cid
	s.client(cid, 6, &protocol.UserMessage{ID: "am_user2_" + cid, ConversationID: cid, Content: "And tomorrow?"}, nil)
	s.server(cid, &protocol.StartAnswer{ID: second, PreviousID: "am_user2_" + cid, ConversationID: cid}, nil)
	s.server(cid, &protocol.AssistantSentence{PreviousID: second, ConversationID: cid, Sequence: 1, Text: "Rain.", IsFinal: ptr(true)}, nil)

	first := &protocol.TurnJudgement{ConversationID: cid, MessageID: f.answer, Correctness: 0.9, Faithfulness: 1, Relevancy: 0.8,
		Rationale: "Says what the weather tool returned.", JudgeModel: "judge-1", CreatedAt: 1700000003000}
	s.agent(cid, first)
	s.agent(cid, first) // redelivered: stored twice in the stream
	s.agent(cid, &protocol.TurnJudgement{ConversationID: cid, MessageID: "am_user2_" + cid, Correctness: 1, Faithfulness: 1, Relevancy: 1,
		JudgeModel: "judge-1", CreatedAt: 1700000003000}) // not an answer
	forged := subjects.Client(cid, protocol.TypeTurnJudgement)
	s.publishOn(forged, cid, &protocol.TurnJudgement{ConversationID: cid, MessageID: second, Correctness: 1, Faithfulness: 1, Relevancy: 1,
		JudgeModel: "me", CreatedAt: 1700000003000}, nil)
	last := s.agent(cid, &protocol.TurnJudgement{ConversationID: cid, MessageID: second, Correctness: 0.5, Faithfulness: 0, Relevancy: 0.6,
		Rationale: "Claims rain the tool never said.", JudgeModel: "judge-1", CreatedAt: 1700000004000})
	s.applied(bus.StreamConversations, last)

	if n := s.queryInt(`SELECT count(*) FROM alicia_message_judgements WHERE conversation_id = $1`, cid); n != 2 {
		t.Fatalf("%d judgement rows, want 2 (one per answer)", n)
	}
	var rationale, model string
	var faith float32
	var judged time.Time
	if err := s.pool.QueryRow(context.Background(), `SELECT rationale, judge_model, faithfulness, judged_at FROM alicia_message_judgements WHERE message_id = $1`,
		f.answer).Scan(&rationale, &model, &faith, &judged); err != nil {
		t.Fatal(err)
	}
	if rationale != first.Rationale || model != "judge-1" || faith != 1 || judged.UnixMilli() != first.CreatedAt {
		t.Fatalf("row of the first answer: %q %q %v %v", rationale, model, faith, judged)
	}
	s.wantScores(cid, 0.7, 0.5, 0.7, 1)

	// A new judgement of the same answer replaces its scores; the means follow.
	last = s.agent(cid, &protocol.TurnJudgement{ConversationID: cid, MessageID: second, Correctness: 0.1, Faithfulness: 1, Relevancy: 0.2,
		Rationale: "Re-judged.", JudgeModel: "judge-2", CreatedAt: 1700000005000})
	s.applied(bus.StreamConversations, last)
	if n := s.queryInt(`SELECT count(*) FROM alicia_message_judgements WHERE conversation_id = $1`, cid); n != 2 {
		t.Fatalf("%d judgement rows after a re-judgement, want 2", n)
	}
	s.wantScores(cid, 0.5, 1, 0.5, 1)

	dlq, err := s.js.OrderedConsumer(context.Background(), bus.StreamDeadLetter,
		jetstream.OrderedConsumerConfig{FilterSubjects: []string{subjects.DeadLetter(s.cfg.Consumer)}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := dlq.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatalf("the judgement on a client subject was not dead-lettered: %v", err)
	}
	if got := m.Headers().Get(bus.HeaderDLQSubject); got != forged || !strings.Contains(m.Headers().Get(bus.HeaderDLQReason), "agent") {
		t.Fatalf("dead letter %s: %s", got, m.Headers().Get(bus.HeaderDLQReason))
	}
}

// wantScores checks the conversation's aggregate columns.
func (s *stack) wantScores(cid string, correctness, faithfulness, relevancy, userFeedback float64) {
	s.t.Helper()
	var c, f, r, u float64
	if err := s.pool.QueryRow(context.Background(), `SELECT correctness, faithfulness, relevancy, user_feedback FROM alicia_conversations WHERE id = $1`,
		cid).Scan(&c, &f, &r, &u); err != nil {
		s.t.Fatal(err)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-6 }
	if !near(c, correctness) || !near(f, faithfulness) || !near(r, relevancy) || !near(u, userFeedback) {
		s.t.Fatalf("scores of %s: correctness %v faithfulness %v relevancy %v user_feedback %v, want %v %v %v %v",
			cid, c, f, r, u, correctness, faithfulness, relevancy, userFeedback)
	}
}
