package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/edge"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
)

// reply is an HTTP answer of the gateway.
type reply struct {
	t      *testing.T
	method string
	path   string
	status int
	header http.Header
	body   []byte
}

// call sends a request with key (none when empty); body is JSON-encoded
// unless it is a string, which is sent as is.
func (s *stack) call(t *testing.T, key, method, path string, body any) reply {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, s.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return send(t, req, method, path)
}

// want fails the test unless the status is status, and decodes the body into v (when not nil).
func (r reply) want(status int, v any) reply {
	r.t.Helper()
	if r.status != status {
		r.t.Fatalf("%s %s = %d %s, want %d", r.method, r.path, r.status, r.body, status)
	}
	if v != nil {
		if err := json.Unmarshal(r.body, v); err != nil {
			r.t.Fatalf("%s %s: decode %s: %v", r.method, r.path, r.body, err)
		}
	}
	return r
}

// wantError checks an error answer: the status, the JSON error shape with
// the same code, and a message.
func (r reply) wantError(status int) string {
	r.t.Helper()
	var e struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	r.want(status, &e)
	if e.Error.Code != status || e.Error.Message == "" {
		r.t.Fatalf("%s %s: error body %s, want code %d and a message", r.method, r.path, r.body, status)
	}
	return e.Error.Message
}

// publish puts envelopes on the bus as the services would (client ones
// with the user in meta) and waits until persistence has applied them.
func (s *stack) publish(t *testing.T, user string, envs ...protocol.Envelope) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var last *jetstream.PubAck
	for _, env := range envs {
		var err error
		switch {
		case env.ConversationID == "":
			last, err = s.pub.PublishSystem(ctx, env, "")
		case env.Type == protocol.TypeUserMessage || env.Type == protocol.TypeConfiguration:
			env.Meta = map[string]any{edge.MetaUserID: user}
			last, err = s.pub.PublishClient(ctx, env)
		case env.Type == protocol.TypeSentencePlayout || env.Type == protocol.TypeTurnJudgement:
			last, err = s.pub.PublishAgent(ctx, env, "")
		default:
			last, err = s.pub.PublishServer(ctx, env, "")
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := rpc.WaitApplied(ctx, s.nc, last.Stream, last.Sequence); err != nil {
			t.Fatal(err)
		}
	}
}

// turn stores a user message and a completed answer with a reasoning step
// and a tool call, and returns the answer's id.
func (s *stack) turn(t *testing.T, user, cid, userID, previous, text string) string {
	t.Helper()
	ans := userID + "_ans"
	var prev *string
	if previous != "" {
		prev = &previous
	}
	s.publish(t, user,
		protocol.New(cid, &protocol.UserMessage{ID: userID, PreviousID: prev, ConversationID: cid, Content: text}),
		protocol.New(cid, &protocol.StartAnswer{ID: ans, PreviousID: userID, ConversationID: cid}),
		protocol.New(cid, &protocol.ReasoningStep{ID: ans + "_r1", MessageID: ans, ConversationID: cid, Sequence: 1, Content: "think"}),
		protocol.New(cid, &protocol.ToolUseRequest{ID: ans + "_t1", MessageID: ans, ConversationID: cid, ToolName: "calculator",
			Parameters: map[string]any{"expression": "2+2"}, Execution: protocol.ToolUseRequestExecutionServer}),
		protocol.New(cid, &protocol.ToolUseResult{ID: ans + "_t1r", RequestID: ans + "_t1", ConversationID: cid, Success: true, Result: 4}),
		protocol.New(cid, &protocol.AssistantSentence{PreviousID: ans, ConversationID: cid, Sequence: 1, Text: "Four.", IsFinal: protocol.Ptr(true)}),
	)
	return ans
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// send does req and reads its whole answer into a reply labelled method
// and path.
func send(t *testing.T, req *http.Request, method, path string) reply {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{t: t, method: method, path: path, status: resp.StatusCode, header: resp.Header, body: b}
}
