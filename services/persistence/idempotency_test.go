package persistence_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/pkg/bus"
)

var snapshotTables = []string{
	"alicia_conversations", "alicia_messages", "alicia_sentences", "alicia_audio", "alicia_memory", "alicia_memory_used",
	"alicia_tool_uses", "alicia_reasoning_steps", "alicia_user_conversation_commentaries", "alicia_votes", "alicia_notes",
	"alicia_session_stats", "alicia_meta",
}

// snapshot returns every row of every table the envelopes write, as JSON, in a stable order.
func snapshot(t *testing.T, s *stack) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, table := range snapshotTables {
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
			out[table] = append(out[table], r)
		}
		rows.Close()
	}
	return out
}

// TestRedeliveryChangesNothing consumes the whole stream twice: the second
// pass, with the consumer deleted and the stored offset forgotten, must
// leave the database exactly as the first pass did.
func TestRedeliveryChangesNothing(t *testing.T) {
	for _, shards := range []int{1, 2} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) { redeliveryChangesNothing(t, shards) })
	}
}

func redeliveryChangesNothing(t *testing.T, shards int) {
	s := newStack(t)
	s.cfg.Shards = shards
	s.start()
	var last uint64
	for i := range 3 {
		f := publishFlow(s, fmt.Sprintf("ac_redeliver%d", i))
		finishFlow(s, f)
		last = f.lastSeq
	}
	s.history("ac_redeliver0", last)
	before := snapshot(t, s)
	if n := len(before["alicia_sentences"]); n != 9 {
		t.Fatalf("first pass wrote %d sentences, want 9", n)
	}

	s.stop()
	ctx := context.Background()
	for _, stream := range []string{bus.StreamConversations, bus.StreamSystem} {
		if err := s.js.DeleteConsumer(ctx, stream, s.cfg.Consumer); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM alicia_stream_offsets`); err != nil {
		t.Fatal(err)
	}
	s.start()
	s.history("ac_redeliver0", last)
	after := snapshot(t, s)
	for _, table := range snapshotTables {
		if strings.Join(before[table], "\n") != strings.Join(after[table], "\n") {
			t.Errorf("%s changed on redelivery:\nbefore %v\nafter  %v", table, before[table], after[table])
		}
	}
}
