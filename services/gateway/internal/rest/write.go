package rest

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
)

// publication puts one envelope on the bus.
type publication func(ctx context.Context, p *bus.Publisher) (*jetstream.PubAck, error)

// asClient publishes env as the user's own client envelope on its
// conversation (meta alicia.user_id set here, never taken from a request).
func asClient(user string, env protocol.Envelope) publication {
	env.Meta = map[string]any{edge.MetaUserID: user}
	return func(ctx context.Context, p *bus.Publisher) (*jetstream.PubAck, error) {
		return p.PublishClient(ctx, env)
	}
}

// asServer publishes env for the conversation's connected clients to see.
func asServer(env protocol.Envelope) publication {
	return func(ctx context.Context, p *bus.Publisher) (*jetstream.PubAck, error) {
		return p.PublishServer(ctx, env, "")
	}
}

// asSystem publishes an internal envelope on alicia.sys.
func asSystem(body protocol.Body) publication {
	env := protocol.New("", body)
	return func(ctx context.Context, p *bus.Publisher) (*jetstream.PubAck, error) {
		return p.PublishSystem(ctx, env, "")
	}
}

// write publishes envelopes in order and returns once persistence has
// applied all of them, so the caller's next read sees the change.
func (a *API) write(c echo.Context, pubs ...publication) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), a.WriteTimeout)
	defer cancel()
	// Publish nothing while persistence is away: the client is told 503 and
	// a retry does not leave a first attempt to be applied later.
	if err := rpc.WaitApplied(ctx, a.NC, bus.StreamConversations, 0); err != nil {
		return dependency(err, "persistence")
	}
	if a.Backlog != nil {
		if why, retry, refuse := a.Backlog.Refuse(); refuse {
			edge.RefusalMetrics().WithLabelValues(edge.RefusedBacklog).Inc()
			c.Response().Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(retry.Seconds())))))
			return fail(http.StatusServiceUnavailable, "%s; try again in %s", why, retry.Round(time.Second))
		}
	}
	upTo := map[string]uint64{}
	for _, pub := range pubs {
		ack, err := pub(ctx, a.Pub)
		if err != nil {
			a.Log.Error().Err(err).Msg("publish")
			return fail(http.StatusServiceUnavailable, "the message bus did not take the change; try again")
		}
		upTo[ack.Stream] = max(upTo[ack.Stream], ack.Sequence)
	}
	for stream, seq := range upTo {
		if err := rpc.WaitApplied(ctx, a.NC, stream, seq); err != nil {
			if errors.Is(err, rpc.ErrNoResponders) {
				return fail(http.StatusServiceUnavailable, "the persistence service stopped; the change is queued and will be applied when it is back")
			}
			return dependency(err, "persistence")
		}
	}
	return nil
}
