package backupcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"
)

// The JetStream API's stream snapshot and restore (what `nats stream
// backup` and `restore` speak): a snapshot is the server's own archive of a
// stream, its messages with their sequences and timestamps and its
// consumers with their positions, s2-compressed; it is kept as the server
// sends it and handed back the same way.
const (
	apiSnapshot = "$JS.API.STREAM.SNAPSHOT."
	apiRestore  = "$JS.API.STREAM.RESTORE."
	// chunkSize is the size of the chunks sent either way.
	chunkSize = 128 << 10
)

// apiError is the error of a JetStream API response.
type apiError struct {
	Code        int    `json:"code"`
	ErrCode     int    `json:"err_code"`
	Description string `json:"description"`
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s (%d, error code %d)", e.Description, e.Code, e.ErrCode)
}

// streamMeta is what a snapshot response tells about the stream, kept as
// the server wrote it (config and state are handed back to the restore).
type streamMeta struct {
	Config json.RawMessage `json:"config"`
	State  json.RawMessage `json:"state"`
}

// streamState is the part of a stream's state the checks read.
type streamState struct {
	Messages  uint64 `json:"messages"`
	Bytes     uint64 `json:"bytes"`
	FirstSeq  uint64 `json:"first_seq"`
	LastSeq   uint64 `json:"last_seq"`
	Consumers int    `json:"consumer_count"`
}

// apiRequest sends a JetStream API request and decodes its response into
// out, returning the response's error as one.
func apiRequest(ctx context.Context, nc *nats.Conn, subject string, req, out any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	msg, err := nc.RequestWithContext(rctx, subject, body)
	if err != nil {
		return fmt.Errorf("%s: %w", subject, err)
	}
	var resp struct {
		Error *apiError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return fmt.Errorf("%s: response %q: %w", subject, msg.Data, err)
	}
	if resp.Error != nil {
		return fmt.Errorf("%s: %w", subject, resp.Error)
	}
	if out != nil {
		if err := json.Unmarshal(msg.Data, out); err != nil {
			return fmt.Errorf("%s: response: %w", subject, err)
		}
	}
	return nil
}

// snapshotStream writes the snapshot of stream, consumers included, to w
// and returns the configuration and state it was taken with. Each chunk is
// acknowledged once written, which is the server's flow control: it sends
// at most its window ahead and gives up on a receiver that stops acking.
func snapshotStream(ctx context.Context, nc *nats.Conn, stream string, w io.Writer) (streamMeta, error) {
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return streamMeta{}, err
	}
	defer sub.Unsubscribe() //nolint:errcheck // fails only on a closed connection, which the snapshot's own error reports
	// The server sends up to its window (8 MiB) before the first ack.
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return streamMeta{}, err
	}
	var meta streamMeta
	req := map[string]any{"deliver_subject": inbox, "chunk_size": chunkSize}
	if err := apiRequest(ctx, nc, apiSnapshot+stream, req, &meta); err != nil {
		return streamMeta{}, fmt.Errorf("snapshot of %s: %w", stream, err)
	}
	for {
		// The server gives up after 5 s without an ack; a chunk comes
		// well within that while it sends.
		mctx, cancel := context.WithTimeout(ctx, time.Minute)
		msg, err := sub.NextMsgWithContext(mctx)
		cancel()
		if err != nil {
			return streamMeta{}, fmt.Errorf("snapshot of %s: waiting for a chunk: %w", stream, err)
		}
		if len(msg.Data) == 0 {
			// The end: status 204 after the last chunk, or the reason the
			// server stopped (408 no flow, 500 with its error).
			if status := msg.Header.Get("Status"); status != "" && status != "204" {
				return streamMeta{}, fmt.Errorf("snapshot of %s: the server ended it with %s %s", stream, status, msg.Header.Get("Description"))
			}
			return meta, nil
		}
		if _, err := w.Write(msg.Data); err != nil {
			return streamMeta{}, fmt.Errorf("snapshot of %s: %w", stream, err)
		}
		if msg.Reply != "" {
			if err := msg.Respond(nil); err != nil {
				return streamMeta{}, fmt.Errorf("snapshot of %s: ack: %w", stream, err)
			}
		}
	}
}

// restoreStream creates stream from a snapshot read from r, with config
// (the snapshot's, possibly adjusted) and the state the snapshot was taken
// with. The stream must not exist. It returns the new stream's creation
// time, which is not the snapshot's: JetStream gives a restored stream the
// time of the restore.
func restoreStream(ctx context.Context, nc *nats.Conn, stream string, config, state json.RawMessage, r io.Reader) (created time.Time, st streamState, err error) {
	var resp struct {
		DeliverSubject string `json:"deliver_subject"`
	}
	req := map[string]json.RawMessage{"config": config, "state": state}
	if err := apiRequest(ctx, nc, apiRestore+stream, req, &resp); err != nil {
		return time.Time{}, streamState{}, fmt.Errorf("restore of %s: %w", stream, err)
	}
	if resp.DeliverSubject == "" {
		return time.Time{}, streamState{}, fmt.Errorf("restore of %s: the server named no subject for the chunks", stream)
	}
	buf := make([]byte, chunkSize)
	for {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			reply, err := nc.RequestWithContext(cctx, resp.DeliverSubject, buf[:n])
			cancel()
			if err != nil {
				return time.Time{}, streamState{}, fmt.Errorf("restore of %s: sending a chunk: %w", stream, err)
			}
			if len(reply.Data) > 0 { // an error; an accepted chunk is acked empty
				var e struct {
					Error *apiError `json:"error"`
				}
				if json.Unmarshal(reply.Data, &e) == nil && e.Error != nil {
					return time.Time{}, streamState{}, fmt.Errorf("restore of %s: %w", stream, e.Error)
				}
				return time.Time{}, streamState{}, fmt.Errorf("restore of %s: the server answered a chunk with %q", stream, reply.Data)
			}
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			return time.Time{}, streamState{}, fmt.Errorf("restore of %s: reading the snapshot: %w", stream, rerr)
		}
	}
	// An empty message ends the upload; the answer comes once the server
	// has stored every message, with the new stream's info.
	fctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	reply, err := nc.RequestWithContext(fctx, resp.DeliverSubject, nil)
	if err != nil {
		return time.Time{}, streamState{}, fmt.Errorf("restore of %s: finishing: %w", stream, err)
	}
	// The stream's info, inline (JSApiStreamCreateResponse).
	var done struct {
		Error   *apiError    `json:"error"`
		Created time.Time    `json:"created"`
		State   *streamState `json:"state"`
	}
	if err := json.Unmarshal(reply.Data, &done); err != nil {
		return time.Time{}, streamState{}, fmt.Errorf("restore of %s: response %q: %w", stream, reply.Data, err)
	}
	if done.Error != nil {
		return time.Time{}, streamState{}, fmt.Errorf("restore of %s: %w", stream, done.Error)
	}
	if done.State == nil || done.Created.IsZero() {
		return time.Time{}, streamState{}, fmt.Errorf("restore of %s: no stream info in %q", stream, reply.Data)
	}
	return done.Created, *done.State, nil
}
