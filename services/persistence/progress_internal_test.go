package persistence

import (
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/pkg/testkit/natstest"
	"github.com/alicia-voice/alicia/services/persistence/internal/consume"
)

// TestProgressRoutes: a progress announcement that does not decode is
// counted under the persistence route of its stream and logged with its
// subject, and the next one is still applied to the stream's progress.
func TestProgressRoutes(t *testing.T) {
	nc := natstest.Connect(t, natstest.Run(t))
	var logs testkit.SyncBuffer
	p := consume.NewProgress([]string{"p0"}, map[string]uint64{"p0": 1})
	a, err := progressAnnouncements(nc, map[string]*consume.Progress{bus.StreamConversations: p}, "me", zerolog.New(&logs))
	if err != nil {
		t.Fatal(err)
	}
	defer a.stop()

	route, subject := progressRoute(bus.StreamConversations), subjects.PersistenceProgress(bus.StreamConversations)
	natstest.Dropped(t, nc, &logs, "persistence", route, bus.DropEnvelope, subject, []byte("{not json"))

	other := &announcements{nc: nc, instance: "other", log: zerolog.Nop()}
	other.publish(bus.StreamConversations, map[string]uint64{"p0": 42})
	testkit.Eventually(t, 5*time.Second, func() bool { return p.Applied("p0") == 42 }, "the good announcement after the malformed one applied")
}
