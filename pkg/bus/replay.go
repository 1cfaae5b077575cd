package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// Stored is one message read back from a stream.
type Stored struct {
	Subject  string
	Sequence uint64
	Time     time.Time
	Header   nats.Header
	Data     []byte
}

// ReplayBatch is how many messages one direct-get request asks for.
const ReplayBatch = 256

// directGetRequest is the JetStream API's batched direct get request
// ($JS.API.DIRECT.GET.<stream>, nats-server ≥ 2.11). nats.go's jetstream
// package only exposes single-message gets, so the batch form is sent here.
type directGetRequest struct {
	Seq     uint64 `json:"seq,omitempty"`
	NextFor string `json:"next_by_subj,omitempty"`
	Batch   int    `json:"batch,omitempty"`
}

// Replay reads, in stream order, every message of stream whose subject
// matches filter, starting at stream sequence from (0 or 1 = the beginning)
// up to the stream's last sequence at the time of the call, and calls fn for
// each. It uses batched direct gets: the server walks its per-subject index
// for filter, so the cost follows the number of matching messages rather than
// the size of the stream, and no consumer is created. The stream must have
// AllowDirect (EnsureStreams sets it).
func Replay(ctx context.Context, nc *nats.Conn, stream, filter string, from uint64, fn func(Stored) error) error {
	if from == 0 {
		from = 1
	}
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return fmt.Errorf("bus: replay subscribe: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	subject := "$JS.API.DIRECT.GET." + stream
	for {
		req, _ := json.Marshal(directGetRequest{Seq: from, NextFor: filter, Batch: ReplayBatch})
		if err := nc.PublishRequest(subject, inbox, req); err != nil {
			return fmt.Errorf("bus: replay request: %w", err)
		}
		got, last, pending, done, err := readBatch(ctx, sub, fn)
		if err != nil {
			return err
		}
		if done || got == 0 || pending == 0 {
			return nil
		}
		from = last + 1
	}
}

// readBatch consumes one batch reply: data messages, then a 204 EOB status.
func readBatch(ctx context.Context, sub *nats.Subscription, fn func(Stored) error) (got int, last, pending uint64, done bool, err error) {
	for {
		msg, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return got, last, pending, false, fmt.Errorf("bus: replay: %w", err)
		}
		if len(msg.Data) == 0 && msg.Header != nil {
			switch msg.Header.Get("Status") {
			case "204": // end of batch
				pending, _ = strconv.ParseUint(msg.Header.Get("Nats-Num-Pending"), 10, 64)
				return got, last, pending, false, nil
			case "404": // nothing (more) matches
				return got, last, 0, true, nil
			case "408", "413":
				return got, last, pending, false, fmt.Errorf("bus: replay: server status %s %s", msg.Header.Get("Status"), msg.Header.Get("Description"))
			}
		}
		seq, perr := strconv.ParseUint(msg.Header.Get("Nats-Sequence"), 10, 64)
		if perr != nil {
			return got, last, pending, false, errors.New("bus: replay: reply without Nats-Sequence")
		}
		ts, _ := time.Parse(time.RFC3339Nano, msg.Header.Get("Nats-Time-Stamp"))
		st := Stored{Subject: msg.Header.Get("Nats-Subject"), Sequence: seq, Time: ts, Header: msg.Header, Data: msg.Data}
		if err := fn(st); err != nil {
			return got, last, pending, false, err
		}
		got++
		last = seq
	}
}
