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

// TestOneBatchAsOneByOne: the same envelopes applied in one batch and one
// envelope per transaction leave the same rows and dead-letter the same
// envelopes. The envelopes chain messages within the batch (a user message
// after the answer the batch made the head, a branch, an answer after its
// user message), repeat a message under a new sequence, link a user message
// to the audio its transcription made first, mix streamed and whole answers
// and interleave two conversations, one of which names the other's messages
// (its reply and its id): the rows a batch accumulates are written before
// anything that depends on them, in stream order.
func TestOneBatchAsOneByOne(t *testing.T) {
	alice, bob := "ac_batch_alice", "ac_batch_bob"
	type pub struct {
		cid    string
		client bool
		body   protocol.Body
	}
	envs := []pub{
		{alice, true, &protocol.Configuration{}},
		{bob, true, &protocol.Configuration{}},
		{alice, true, &protocol.UserMessage{ID: "am_u1", ConversationID: alice, Content: "one"}},
		{alice, false, &protocol.StartAnswer{ID: "am_a1", PreviousID: "am_u1", ConversationID: alice}},
		{alice, false, &protocol.AssistantSentence{PreviousID: "am_a1", ConversationID: alice, Sequence: 1, Text: "First.", IsFinal: ptr(true)}},
		{bob, true, &protocol.UserMessage{ID: "am_b1", ConversationID: bob, Content: "bob"}},
		{alice, true, &protocol.UserMessage{ID: "am_u2", ConversationID: alice, Content: "two"}},
		{bob, true, &protocol.UserMessage{ID: "am_b2", PreviousID: ptr("am_u2"), ConversationID: bob, Content: "a reply to alice"}},
		{alice, false, &protocol.StartAnswer{ID: "am_a2", PreviousID: "am_u2", ConversationID: alice}},
		{bob, true, &protocol.UserMessage{ID: "am_a2", ConversationID: bob, Content: "alice's answer id"}},
		{alice, false, &protocol.AssistantSentence{PreviousID: "am_a2", ConversationID: alice, Sequence: 1, Text: "Second."}},
		{alice, true, &protocol.UserMessage{ID: "am_u1", ConversationID: alice, Content: "one"}}, // again
		{alice, true, &protocol.UserMessage{ID: "am_u3", ConversationID: alice, Content: "three"}},
		{alice, true, &protocol.UserMessage{ID: "am_u4", PreviousID: ptr("am_a1"), ConversationID: alice, Content: "a branch"}},
		{alice, false, &protocol.AssistantMessage{ID: "am_a4", PreviousID: ptr("am_u4"), ConversationID: alice, Content: "Whole."}},
		{alice, true, &protocol.Transcription{ID: "am_u5", ConversationID: alice, Text: "spoken", Final: true}},
		{alice, true, &protocol.UserMessage{ID: "am_u5", ConversationID: alice, Content: "spoken"}},
		{bob, false, &protocol.StartAnswer{ID: "am_b1a", PreviousID: "am_b1", ConversationID: bob}},
		{alice, false, &protocol.StartAnswer{ID: "am_a5", PreviousID: "am_u5", ConversationID: alice}},
		{alice, false, &protocol.AssistantSentence{PreviousID: "am_a5", ConversationID: alice, Sequence: 1, Text: "Fifth.", IsFinal: ptr(true)}},
		{bob, true, &protocol.UserMessage{ID: "am_b3", ConversationID: bob, Content: "after the answer"}},
	}
	run := func(batch int) (rows, dead []string) {
		s := newStack(t)
		s.cfg.BatchSize = batch
		stanza := map[string]int32{}
		var last uint64
		for _, e := range envs {
			if e.client {
				stanza[e.cid]++
				last = s.client(e.cid, stanza[e.cid], e.body, nil)
			} else {
				last = s.server(e.cid, e.body, nil)
			}
		}
		s.start()
		s.applied(bus.StreamConversations, last)
		r, err := s.pool.Query(context.Background(), `SELECT concat_ws(' ', m.id, m.conversation_id, m.sequence_number,
				COALESCE(m.previous_id, '-'), m.message_role, m.completion_status, m.contents, COALESCE(m.audio_id, '-'),
				COALESCE(a.message_id, '-'), c.tip_message_id)
			FROM alicia_messages m JOIN alicia_conversations c ON c.id = m.conversation_id
			LEFT JOIN alicia_audio a ON a.id = m.audio_id ORDER BY m.id`)
		if err != nil {
			t.Fatal(err)
		}
		for r.Next() {
			var line string
			if err := r.Scan(&line); err != nil {
				t.Fatal(err)
			}
			rows = append(rows, line)
		}
		if r.Err() != nil {
			t.Fatal(r.Err())
		}
		if n := s.queryInt(`SELECT count(*) FROM alicia_sentences`); n != 3 {
			t.Errorf("batch %d: %d sentences, want 3", batch, n)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		dlq, err := s.js.OrderedConsumer(ctx, bus.StreamDeadLetter, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subjects.DeadLetter(s.cfg.Consumer)}})
		if err != nil {
			t.Fatal(err)
		}
		for {
			m, err := dlq.Next(jetstream.FetchMaxWait(time.Second))
			if err != nil {
				break
			}
			dead = append(dead, m.Headers().Get(bus.HeaderDLQSequence)+" "+m.Headers().Get(bus.HeaderDLQReason))
		}
		return rows, dead
	}
	oneByOne, deadOne := run(1)
	batched, deadBatch := run(1000)
	t.Logf("rows:\n%s", strings.Join(oneByOne, "\n"))
	if !slices.Equal(oneByOne, batched) {
		t.Errorf("one batch:\n%s\none by one:\n%s", strings.Join(batched, "\n"), strings.Join(oneByOne, "\n"))
	}
	if len(deadOne) != 2 || fmt.Sprint(deadOne) != fmt.Sprint(deadBatch) {
		t.Errorf("dead letters one by one %q, in one batch %q; want the same two", deadOne, deadBatch)
	}
	for _, want := range []string{
		"am_a1 ac_batch_alice 2 am_u1 assistant completed First.",
		"am_u2 ac_batch_alice 3 am_a1 user",
		"am_u4 ac_batch_alice 3 am_a1 user",
		"am_a4 ac_batch_alice 4 am_u4 assistant completed Whole.",
		"am_u5 ac_batch_alice",
		"am_b3 ac_batch_bob 3 am_b1a user",
	} {
		if !slices.ContainsFunc(oneByOne, func(r string) bool { return strings.HasPrefix(r, want) }) {
			t.Errorf("no row %q", want)
		}
	}
}
