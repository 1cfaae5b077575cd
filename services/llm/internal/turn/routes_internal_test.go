package turn

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/services/llm/internal/metrics"
)

// TestRoutesCountAndLogAMalformedStop: a ControlStop that does not decode is
// counted under the llm's control_stop route and logged with its subject,
// and the next, good, ControlStop still stops the turn.
func TestRoutesCountAndLogAMalformedStop(t *testing.T) {
	nc := natstest.Connect(t, natstest.Run(t))
	var logs testkit.SyncBuffer
	e := New(Deps{NC: nc, Metrics: metrics.Default(), Log: zerolog.New(&logs)}, Settings{})
	unsubscribe, err := e.Listen(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer unsubscribe()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	e.stops.begin("ac_routes", "am_1", cancel)

	subject := subjects.Client("ac_routes", protocol.TypeControlStop)
	natstest.Dropped(t, nc, &logs, "llm", "control_stop", bus.DropEnvelope, subject, []byte("\xc1 not an envelope"))
	if ctx.Err() != nil {
		t.Fatal("a malformed stop stopped the turn")
	}

	target := "am_1"
	b, err := protocol.Encode(protocol.New("ac_routes", &protocol.ControlStop{ConversationID: "ac_routes", TargetID: &target}))
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish(subject, b); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
		if !errors.Is(context.Cause(ctx), ErrStopped) {
			t.Fatalf("turn ended by %v, want ErrStopped", context.Cause(ctx))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the good stop after the malformed one did not stop the turn")
	}
}
