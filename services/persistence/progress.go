package persistence

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/services/persistence/internal/consume"
)

// progressNote is what an instance announces after each committed batch:
// the offsets of the partitions it applied.
type progressNote struct {
	Instance string            `json:"instance"`
	Offsets  map[string]uint64 `json:"offsets"`
}

// announcements publishes this instance's progress on core NATS and feeds
// the other instances' into progress, so that history.get and
// persistence.applied, answered by any instance, wait only as long as the
// partition they need takes to be applied, wherever it is.
type announcements struct {
	nc       *nats.Conn
	instance string
	log      zerolog.Logger
	subs     *bus.Subscriptions
}

func progressAnnouncements(nc *nats.Conn, progress map[string]*consume.Progress, instance string, log zerolog.Logger) (*announcements, error) {
	a := &announcements{nc: nc, instance: instance, log: log}
	rt := bus.NewRoutes("persistence", log)
	for stream, p := range progress {
		bus.OnDecoded(rt, progressRoute(stream), subjects.PersistenceProgress(stream), bus.JSON[progressNote], func(_ context.Context, n progressNote, _ bus.Inbound) error {
			if n.Instance != instance {
				p.Advance(n.Offsets)
			}
			return nil
		})
	}
	subs, err := rt.Subscribe(context.Background(), nc)
	if err != nil {
		return nil, fmt.Errorf("persistence: progress announcements: %w", err)
	}
	a.subs = subs
	return a, nil
}

// progressRoute names the route of a stream's announcements.
func progressRoute(stream string) string { return "progress_" + strings.ToLower(stream) }

// publish announces offsets of stream (at most once: a lost one is made up
// for by the database when a reader waits).
func (a *announcements) publish(stream string, offsets map[string]uint64) {
	data, err := json.Marshal(progressNote{Instance: a.instance, Offsets: offsets})
	if err == nil {
		err = a.nc.Publish(subjects.PersistenceProgress(stream), data)
	}
	if err != nil {
		a.log.Debug().Err(err).Msg("progress announcement not sent")
	}
}

func (a *announcements) stop() { a.subs.Close() }
