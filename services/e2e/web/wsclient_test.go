package web_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// wsClient is a plain WebSocket client of the gateway, as a script would
// write one: msgpack envelopes, a bearer key, one conversation. It is the
// baseline the page's figures are compared with.
type wsClient struct {
	tb   testing.TB
	c    *websocket.Conn
	cid  string
	next int32
	last string // the newest message of the conversation (the next one's previousId)
}

// openWS dials base (http://host:port) and opens a new conversation with
// the features the web client asks for.
func openWS(tb testing.TB, base, key string) *wsClient {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	url := "ws" + strings.TrimPrefix(base, "http") + "/v1/ws"
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}})
	if err != nil {
		tb.Fatalf("dial %s: %v", url, err)
	}
	c.SetReadLimit(4 << 20)
	tb.Cleanup(func() { c.CloseNow() })
	w := &wsClient{tb: tb, c: c, next: 1}
	w.send(&protocol.Configuration{
		ClientVersion: protocol.Ptr("bench/1"),
		Device:        protocol.Ptr("bench"),
		Features: []protocol.ConfigurationFeaturesElem{
			protocol.ConfigurationFeaturesElemStreaming, protocol.ConfigurationFeaturesElemPartialResponses,
			protocol.ConfigurationFeaturesElemReasoningSteps, protocol.ConfigurationFeaturesElemToolUse,
		},
	})
	reply := w.until(func(e protocol.Envelope) bool { return e.Type == protocol.TypeConfiguration && e.StanzaID < 0 })
	w.cid = reply.ConversationID
	if w.cid == "" {
		tb.Fatal("the gateway's Configuration names no conversation")
	}
	return w
}

func (w *wsClient) send(body protocol.Body) {
	w.tb.Helper()
	b, err := protocol.Encode(protocol.Envelope{StanzaID: w.next, ConversationID: w.cid, Type: body.MessageType(), Body: body})
	if err != nil {
		w.tb.Fatal(err)
	}
	w.next++
	if err := w.c.Write(context.Background(), websocket.MessageBinary, b); err != nil {
		w.tb.Fatal(err)
	}
}

// until reads envelopes until match; it fails after 30 s.
func (w *wsClient) until(match func(protocol.Envelope) bool) protocol.Envelope {
	w.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		_, b, err := w.c.Read(ctx)
		if err != nil {
			w.tb.Fatalf("websocket: %v", err)
		}
		env, err := protocol.Decode(b)
		if err != nil {
			w.tb.Fatalf("decode: %v", err)
		}
		if e, ok := env.Body.(*protocol.ErrorMessage); ok {
			w.tb.Fatalf("ErrorMessage %d: %s", e.Code, e.Message)
		}
		if match(env) {
			return env
		}
	}
}

// turn sends text as the next message of the conversation and reads its
// whole answer; it returns the time from just before the send to the
// first AssistantSentence of the answer.
func (w *wsClient) turn(text string) time.Duration {
	w.tb.Helper()
	id := protocol.NewID("am")
	var prev *string
	if w.last != "" {
		prev = protocol.Ptr(w.last)
	}
	t0 := time.Now()
	w.send(&protocol.UserMessage{ID: id, PreviousID: prev, ConversationID: w.cid, Content: text, Timestamp: protocol.Ptr(time.Now().UnixMilli())})
	var answer string
	var first time.Duration
	w.until(func(e protocol.Envelope) bool {
		switch b := e.Body.(type) {
		case *protocol.StartAnswer:
			if b.PreviousID == id {
				answer = b.ID
			}
		case *protocol.AssistantSentence:
			if answer == "" || b.PreviousID != answer {
				return false
			}
			if first == 0 {
				first = time.Since(t0)
			}
			return b.IsFinal != nil && *b.IsFinal
		case *protocol.AssistantMessage:
			return answer != "" && b.ID == answer
		}
		return false
	})
	if first == 0 {
		w.tb.Fatalf("the answer to %q came without a sentence", text)
	}
	w.last = answer
	return first
}

// seedText is the user's message of turn i of a seeded conversation: most
// get a one-sentence answer, every tenth a Markdown answer (code, list,
// table) and every tenth from the fifth a calculator tool call, as the
// fake model answers them (model_test.go).
func seedText(i int) string {
	switch i % 10 {
	case 0:
		return fmt.Sprintf("%s, please (turn %d)", markdownPhrase, i)
	case 5:
		return fmt.Sprintf("What is %s? (turn %d)", toolPhrase, i)
	}
	return fmt.Sprintf("Turn %d: tell me something about the weather, the sea and the hills.", i)
}
