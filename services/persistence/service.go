package persistence

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/services/persistence/internal/consume"
	"github.com/alicia-voice/alicia/services/persistence/internal/store"
)

// HistorySubject is the request subject of history.get.
const HistorySubject = "history.get"

// HistoryRequest asks for a conversation's current branch once every
// envelope up to MinSequence (a CONVERSATIONS stream sequence, e.g. the
// PubAck of the caller's own publish) has been applied.
type HistoryRequest struct {
	ConversationID string `msgpack:"conversationId"`
	MinSequence    uint64 `msgpack:"minSequence,omitempty"`
	Limit          int    `msgpack:"limit,omitempty"`
}

// HistoryResponse is the reply of history.get.
type HistoryResponse struct {
	Messages        []store.HistoryMessage `msgpack:"messages"`
	AppliedSequence uint64                 `msgpack:"appliedSequence"`
}

// HistoryError codes (micro error headers).
const (
	HistoryBadRequest = "400"
	HistoryTimeout    = "504"
	HistoryInternal   = "500"
)

func addHistoryService(nc *nats.Conn, st *store.Store, wm *consume.Watermark, wait time.Duration) (micro.Service, error) {
	svc, err := micro.AddService(nc, micro.Config{Name: "alicia-persistence", Version: "0.1.0", Description: "Alicia persistence: history with read-your-writes"})
	if err != nil {
		return nil, err
	}
	h := micro.HandlerFunc(func(r micro.Request) {
		var req HistoryRequest
		if err := msgpack.Unmarshal(r.Data(), &req); err != nil || subjects.Validate(req.ConversationID) != nil {
			_ = r.Error(HistoryBadRequest, "history.get wants {conversationId, minSequence?, limit?} as msgpack", nil)
			return
		}
		if req.Limit <= 0 || req.Limit > 10000 {
			req.Limit = 10000
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if err := wm.Wait(ctx, req.MinSequence); err != nil {
			_ = r.Error(HistoryTimeout, "sequence not applied yet", nil)
			return
		}
		msgs, err := st.History(ctx, req.ConversationID, req.Limit)
		if err != nil {
			code := HistoryInternal
			if errors.Is(err, context.DeadlineExceeded) {
				code = HistoryTimeout
			}
			_ = r.Error(code, err.Error(), nil)
			return
		}
		b, _ := msgpack.Marshal(HistoryResponse{Messages: msgs, AppliedSequence: wm.Applied()})
		_ = r.Respond(b)
	})
	if err := svc.AddEndpoint("history_get", h, micro.WithEndpointSubject(HistorySubject)); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	return svc, nil
}
