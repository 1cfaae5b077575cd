package subjects_test

import (
	"errors"
	"testing"

	"github.com/alicia-voice/alicia/pkg/subjects"
)

func TestTurnSubjects(t *testing.T) {
	if got := subjects.TurnPartition(7); got != "alicia.turns.7.>" {
		t.Errorf("TurnPartition = %q", got)
	}
	if got := subjects.TurnTransform(32, tok("user_message")); got != "alicia.turns.{{partition(32,1)}}.{{wildcard(1)}}.user_message" {
		t.Errorf("TurnTransform = %q", got)
	}
	s := subjects.Turn(3, convID("ac_1"), tok("control_variation"))
	if s != "alicia.turns.3.ac_1.control_variation" {
		t.Fatalf("Turn = %q", s)
	}
	p, err := subjects.ParseTurn(s)
	if err != nil || p.Partition != 3 || p.ConversationID != "ac_1" || p.TypeToken != "control_variation" {
		t.Fatalf("ParseTurn = %+v, %v", p, err)
	}
	for _, bad := range []string{"alicia.turns.x.ac_1.user_message", "alicia.turns.-1.ac_1.user_message", "alicia.conv.ac_1.client.user_message", "alicia.turns.1.ac_1"} {
		t.Run(bad, func(t *testing.T) {
			if _, err := subjects.ParseTurn(bad); !errors.Is(err, subjects.ErrInvalid) {
				t.Fatalf("ParseTurn(%q) err = %v", bad, err)
			}
		})
	}
}
