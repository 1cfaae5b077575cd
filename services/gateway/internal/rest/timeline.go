package rest

import (
	"github.com/alicia-voice/alicia/pkg/restapi"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/timeline"
	"github.com/alicia-voice/alicia/services/gateway/internal/auth"
	"github.com/alicia-voice/alicia/services/gateway/internal/conns"
	"github.com/alicia-voice/alicia/services/gateway/internal/session"
)

// Timeline limits (API.md).
const (
	defaultTimelineLimit = 200
	maxTimelineLimit     = 1000
	// timelineHeartbeat is how often an idle timeline stream gets a
	// comment line, so proxies and browsers keep it open.
	timelineHeartbeat = 15 * time.Second
	// timelineWriteTimeout bounds one write to a timeline stream: a client
	// that reads nothing for that long is dropped.
	timelineWriteTimeout = 10 * time.Second
)

// conversationTimeline answers a page of the conversation's timeline: the
// steps after ?after=, at most ?limit=; a bounded number at once
// (timelineReads).
func (a *API) conversationTimeline(c echo.Context) error {
	after, err := sequenceParam("after", c.QueryParam("after"))
	if err != nil {
		return err
	}
	limit, err := limitParam(c, defaultTimelineLimit, maxTimelineLimit)
	if err != nil {
		return err
	}
	release, err := a.startTimelineRead(c, auth.UserOf(c))
	if err != nil {
		return err
	}
	defer release()
	conv, err := a.conversation(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	r, first, err := a.openTimeline(ctx, conv.ID, after)
	if err != nil {
		return err
	}
	page := restapi.TimelinePage{Steps: []restapi.Step{}, Next: after}
	page.More, err = r.page(ctx, after, limit, first, func(st timeline.Step) { page.Steps = append(page.Steps, st) })
	if err != nil {
		return a.busDown(err, conv.ID)
	}
	if n := len(page.Steps); n > 0 {
		page.Next = page.Steps[n-1].Sequence
	}
	if len(page.Steps) > 0 && !page.More {
		page.Last = page.Next
	} else {
		md, err := r.edge(ctx, jetstream.DeliverLastPolicy)
		if err != nil {
			return a.busDown(err, conv.ID)
		}
		if md != nil {
			page.Last = md.Sequence.Stream
		}
	}
	return c.JSON(http.StatusOK, page)
}

// conversationTimelineStream answers the conversation's timeline as
// server-sent events: every step after ?after= (or the Last-Event-ID an
// EventSource resumes with), then each new one as it is stored, until the
// client goes away or the server shuts down.
func (a *API) conversationTimelineStream(c echo.Context) error {
	after, err := sequenceParam("after", c.QueryParam("after"))
	if err != nil {
		return err
	}
	if id := c.Request().Header.Get("Last-Event-ID"); id != "" {
		if after, err = sequenceParam("Last-Event-ID", id); err != nil {
			return err
		}
	}
	conv, err := a.conversation(c)
	if err != nil {
		return err
	}
	p := conns.Principal{User: auth.UserOf(c), Key: auth.KeyOf(c)}
	sid, _, bySession := auth.SessionOf(c)
	if bySession {
		p.Session = session.KeyOf(sid)
	}
	tracked, err := a.streams.Open(p, a.StreamsPerUser)
	switch {
	case errors.Is(err, conns.ErrTooMany):
		return fail(http.StatusTooManyRequests, "too many timeline streams for this user (at most %d); close one first", a.StreamsPerUser)
	case err != nil:
		return fail(http.StatusServiceUnavailable, "the server is shutting down; reconnect")
	}
	defer tracked.Release()
	tracked.Bind(conv.ID)
	ctx := c.Request().Context()
	if bySession && a.Sessions != nil {
		if _, err := a.Sessions.Lookup(ctx, sid); errors.Is(err, session.ErrNotFound) {
			return fail(http.StatusUnauthorized, "the session expired or was signed out; sign in again (POST /v1/session)")
		}
	}
	r, first, err := a.openTimeline(ctx, conv.ID, after)
	if err != nil {
		return err
	}
	s := &timelineStream{api: a, conn: tracked, reader: r, after: after, first: first, w: c.Response()}
	if err := s.open(ctx); err != nil {
		return a.busDown(err, conv.ID)
	}
	defer s.close()
	err = s.run(ctx)
	if err != nil && ctx.Err() == nil {
		a.Log.Info().Err(err).Str("conversation_id", conv.ID).Msg("timeline stream ended")
	}
	return nil
}

// timelineStream is one open timeline stream: an ordered consumer of the
// conversation's subjects and the response its steps are written to.
type timelineStream struct {
	api    *API
	conn   *conns.Conn
	reader timelineReader
	after  uint64
	first  time.Time
	w      *echo.Response
	rc     *http.ResponseController

	cons jetstream.Consumer
	it   jetstream.MessagesContext
	msgs chan jetstream.Msg
	errc chan error
	stop chan struct{}
	wg   sync.WaitGroup
}

// open starts the consumer; nothing is written yet, so a failure is still
// an error answer.
func (s *timelineStream) open(ctx context.Context) error {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{s.reader.filter}, NamePrefix: "gateway_timeline_" + nuid.Next(),
		DeliverPolicy: jetstream.DeliverAllPolicy, InactiveThreshold: time.Minute}
	if rc := s.reader.consumerConfig(s.after); rc.DeliverPolicy == jetstream.DeliverByStartSequencePolicy {
		cfg.DeliverPolicy, cfg.OptStartSeq = rc.DeliverPolicy, rc.OptStartSeq
	}
	cons, err := s.reader.js.OrderedConsumer(ctx, bus.StreamConversations, cfg)
	if err != nil {
		return err
	}
	// A few messages at a time: one may be 2 MiB of audio.
	it, err := cons.Messages(jetstream.PullMaxMessages(timelineFetch))
	if err != nil {
		return err
	}
	s.cons, s.it = cons, it
	s.msgs, s.errc, s.stop = make(chan jetstream.Msg), make(chan error, 1), make(chan struct{})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			m, err := it.Next()
			if err != nil {
				s.errc <- err
				return
			}
			select {
			case s.msgs <- m:
			case <-s.stop:
				return
			}
		}
	}()
	return nil
}

// close stops the consumer and deletes it on the server (an ordered
// consumer is otherwise left until it has been idle for its threshold).
func (s *timelineStream) close() {
	s.it.Stop()
	close(s.stop)
	s.wg.Wait()
	if info := s.cons.CachedInfo(); info != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.reader.js.DeleteConsumer(ctx, bus.StreamConversations, info.Name)
	}
}

// run writes the stream until the client goes away (ctx), the server shuts
// down or the consumer fails.
func (s *timelineStream) run(ctx context.Context) error {
	h := s.w.Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set(echo.HeaderCacheControl, "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	s.w.WriteHeader(http.StatusOK)
	s.rc = http.NewResponseController(s.w)
	// The server's read timeout would end the request (its context) while
	// the stream goes on: a stream reads nothing more from the client.
	if err := s.rc.SetReadDeadline(time.Time{}); err != nil {
		return err
	}
	if err := s.write([]byte(": timeline\n\n")); err != nil {
		return err
	}
	tl := timeline.Timeline{}
	tl.Anchor(s.first, time.Time{})
	beat := time.NewTicker(timelineHeartbeat)
	defer beat.Stop()
	for {
		select {
		case m := <-s.msgs:
			md, err := m.Metadata()
			if err != nil {
				return err
			}
			seq := md.Sequence.Stream
			if seq == s.after {
				tl.Anchor(s.first, md.Timestamp)
				continue
			}
			data, err := json.Marshal(tl.Step(seq, m.Subject(), md.Timestamp, m.Data()))
			if err != nil {
				return err
			}
			if err := s.write(fmt.Appendf(nil, "id: %d\nevent: step\ndata: %s\n\n", seq, data)); err != nil {
				return err
			}
		case <-beat.C:
			if err := s.write([]byte(": keepalive\n\n")); err != nil {
				return err
			}
		case <-s.api.streams.Stopping():
			// EventSource reconnects with Last-Event-ID, to this gateway
			// once it is back or to another one.
			return s.write([]byte(": server restarting; reconnect\n\n"))
		case <-s.conn.Ended():
			// Revoked: the client is told why (event "revoked"), then the
			// stream ends. An EventSource that reconnects anyway is
			// refused (401 or 404), which ends it for good.
			data, err := json.Marshal(map[string]string{"reason": s.conn.Reason().String()})
			if err != nil {
				return err
			}
			return s.write(fmt.Appendf(nil, "event: revoked\ndata: %s\n\n", data))
		case err := <-s.errc:
			return err
		case <-ctx.Done():
			return nil
		}
	}
}

func (s *timelineStream) write(b []byte) error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(timelineWriteTimeout))
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.rc.Flush()
}

// timelineReader reads conversation cid's envelopes.
func (a *API) timelineReader(cid string) (timelineReader, error) {
	js, err := jetstream.New(a.NC)
	if err != nil {
		return timelineReader{}, fail(http.StatusServiceUnavailable, "message bus unavailable")
	}
	return newTimelineReader(js, cid), nil
}

// busDown logs a failed read of the stream and answers 503.
// openTimeline is the reader of conversation cid's steps and the time of
// its first envelope, for a read after stream sequence after.
func (a *API) openTimeline(ctx context.Context, cid string, after uint64) (timelineReader, time.Time, error) {
	r, err := a.timelineReader(cid)
	if err != nil {
		return r, time.Time{}, err
	}
	first, err := r.first(ctx, after)
	if err != nil {
		return r, time.Time{}, a.busDown(err, cid)
	}
	return r, first, nil
}

func (a *API) busDown(err error, cid string) error {
	if !errors.Is(err, context.Canceled) {
		a.Log.Warn().Err(err).Str("conversation_id", cid).Msg("timeline read")
	}
	return fail(http.StatusServiceUnavailable, "message bus unavailable")
}

// sequenceParam reads a stream sequence (a whole number ≥ 0; "" is 0).
func sequenceParam(name, s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fail(http.StatusBadRequest, "%s must be a stream sequence, a whole number from 0", name)
	}
	return n, nil
}

// EndSession ends the timeline streams opened with the session of bucket
// key key (session.KeyOf); each is told why (event "revoked").
func (a *API) EndSession(key string) int { return a.streams.EndSession(key) }

// EndKey ends the timeline streams of user opened with the API key of
// fingerprint, directly or through a session; each is told why.
func (a *API) EndKey(user, fingerprint string) int { return a.streams.EndKey(user, fingerprint) }

// EndConversation ends the timeline streams of conversation cid; each is
// told why (event "revoked").
func (a *API) EndConversation(cid string) int { return a.streams.EndConversation(cid) }

// Shutdown ends the open timeline streams (each is told to reconnect) and
// waits until they are over or ctx ends; streams asked for afterwards get
// 503. The HTTP server's own Shutdown would wait for them instead.
func (a *API) Shutdown(ctx context.Context) error { return a.streams.Shutdown(ctx) }
