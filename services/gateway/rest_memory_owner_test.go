package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// TestMessagesShowOnlyTheOwnersMemories: a memory use in alice's
// conversation naming bob's memory (a row persistence wrote before it
// checked ownership) does not show bob's memory in alice's messages; a tool
// use of another conversation attached to her answer does not show either.
func TestMessagesShowOnlyTheOwnersMemories(t *testing.T) {
	s := newStack(t)
	const cid, bobCID = "ac_alicemem0123456789", "ac_bobmem012345678901"
	s.publish(t, "alice", protocol.New(cid, &protocol.Configuration{}))
	ans := s.turn(t, "alice", cid, "am_amq", "", "what do you know?")
	s.publish(t, "bob", protocol.New(bobCID, &protocol.Configuration{}))
	s.turn(t, "bob", bobCID, "am_bmq", "", "hello")
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO alicia_memory (id, user_id, content) VALUES ('amem_bob', 'bob', 'bob''s bank pin is 1234'),
			('amem_alice', 'alice', 'alice likes tea')`,
		`INSERT INTO alicia_memory_used (id, conversation_id, message_id, memory_id, similarity_score, meta, position_in_results)
			VALUES ('amu_stolen', '` + cid + `', '` + ans + `', 'amem_bob', 0.9, '{"content": "what the trace said"}', 1),
			('amu_own', '` + cid + `', '` + ans + `', 'amem_alice', 0.8, '{}', 2)`,
		`INSERT INTO alicia_tool_uses (id, conversation_id, message_id, tool_name, status, sequence_number)
			VALUES ('atu_foreign', '` + bobCID + `', '` + ans + `', 'bobs_tool', 'pending', 9)`,
	} {
		if _, err := s.pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	r := s.call(t, aliceKey, "GET", "/v1/conversations/"+cid, nil).want(http.StatusOK, nil)
	body := string(r.body)
	if strings.Contains(body, "bank pin") {
		t.Errorf("alice sees bob's memory: %s", body)
	}
	if strings.Contains(body, "bobs_tool") {
		t.Errorf("alice sees a tool use of bob's conversation: %s", body)
	}
	if !strings.Contains(body, "alice likes tea") {
		t.Errorf("alice does not see her own memory: %s", body)
	}
}
