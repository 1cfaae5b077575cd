package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// dialSession opens the WebSocket as the web client's page does: the
// session cookie and the page's Origin.
func dialSession(t *testing.T, base, cookie string) *wsClient {
	t.Helper()
	return dialWS(t, strings.Replace(base, "http", "ws", 1)+"/v1/ws", &websocket.DialOptions{
		HTTPHeader: http.Header{"Cookie": {"alicia_session=" + cookie}, "Origin": {base}}})
}

// bind configures the connection for conversation cid and waits for the
// server's answer.
func (w *wsClient) bind(cid string) {
	w.t.Helper()
	w.send(cid, &protocol.Configuration{ConversationID: &cid, ClientVersion: protocol.Ptr("test/1")})
	for {
		if env := w.recv(); env.Type == protocol.TypeConfiguration {
			return
		}
	}
}

// alive checks the connection is still served: a text frame is answered
// with an ErrorMessage (envelopes are binary).
func (w *wsClient) alive() {
	w.t.Helper()
	if err := w.c.Write(context.Background(), websocket.MessageText, []byte("ping")); err != nil {
		w.t.Fatalf("the connection is closed: %v", err)
	}
	for {
		if env := w.recv(); env.Type == protocol.TypeErrorMessage && env.Body.(*protocol.ErrorMessage).Code == protocol.CodeMalformed {
			return
		}
	}
}

// waitClosed reads until the server closes the connection and checks the
// close code and that the reason says why; it returns how long it took
// from since.
func (w *wsClient) waitClosed(code websocket.StatusCode, reason string, since time.Time) time.Duration {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		_, _, err := w.c.Read(ctx)
		if err == nil {
			continue // what was on its way before the close
		}
		took := time.Since(since)
		var ce websocket.CloseError
		if !errors.As(err, &ce) {
			w.t.Fatalf("connection ended with %v after %s, want close code %d", err, took, code)
		}
		if ce.Code != code || !strings.Contains(ce.Reason, reason) {
			w.t.Fatalf("closed with %d %q, want %d and a reason with %q", ce.Code, ce.Reason, code, reason)
		}
		return took
	}
}

// waitRevoked waits for the stream's "revoked" event, whose reason holds
// reason, and its end; it returns how long it took from since.
func (s *sseStream) waitRevoked(reason string, since time.Time) time.Duration {
	s.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-s.events:
			if ev.event == "step" {
				continue
			}
			took := time.Since(since)
			if ev.event != "revoked" || !strings.Contains(ev.data, reason) {
				s.t.Fatalf("event %+v, want revoked with %q", ev, reason)
			}
			select {
			case <-s.ended:
			case <-timeout:
				s.t.Fatal("the stream did not end after its revoked event")
			}
			return took
		case err := <-s.ended:
			// The events before the end are all queued by now.
			s.ended <- err
			if len(s.events) > 0 {
				continue
			}
			s.t.Fatalf("the stream ended (%v) without a revoked event", err)
		case <-timeout:
			s.t.Fatal("no revoked event within 10 s")
		}
	}
}

// TestSignOutClosesConnectionsOnAnotherReplica: signing out on one replica
// closes that session's WebSocket (4401, "signed out") and timeline
// stream (event revoked) on another within a second; the same user's
// connection opened with a key stays; the cookie opens nothing again.
func TestSignOutClosesConnectionsOnAnotherReplica(t *testing.T) {
	s := newStack(t)
	other, _ := s.replica(t, nil, nil)
	cookie, _ := signIn(t, s.base, aliceKey)
	cid := s.newConversation(t, aliceKey)

	ws := dialSession(t, other, cookie)
	ws.bind(cid)
	byKey := s.dial(t, aliceKey)
	byKey.bind(cid)
	stream := openStream(t, other, cookie, cid, "", "")
	if stream.resp.StatusCode != http.StatusOK {
		t.Fatalf("timeline stream: %d", stream.resp.StatusCode)
	}
	<-stream.comments // ": timeline": the stream is open

	at := time.Now()
	browserCall(t, s.base, cookie, s.base, "DELETE", "/v1/session", nil).want(http.StatusNoContent, nil)
	wsTook := ws.waitClosed(4401, "signed out", at)
	sseTook := stream.waitRevoked("signed out", at)
	t.Logf("sign-out to close on another replica: WebSocket %s, timeline stream %s", wsTook, sseTook)
	if wsTook > 5*time.Second || sseTook > 5*time.Second {
		t.Fatalf("closed after %s and %s: want well under a second", wsTook, sseTook)
	}

	// The key's connection is another principal: still served.
	byKey.alive()
	// The signed-out cookie opens nothing again, on either replica.
	for _, base := range []string{s.base, other} {
		_, resp, err := websocket.Dial(context.Background(), strings.Replace(base, "http", "ws", 1)+"/v1/ws", &websocket.DialOptions{
			HTTPHeader: http.Header{"Cookie": {"alicia_session=" + cookie}, "Origin": {base}}})
		if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("upgrade with the signed-out cookie: %v, want 401", err)
		}
	}
}

// TestDeleteConversationClosesItsConnections: deleting a conversation on
// one replica closes the WebSockets bound to it (4404, "conversation
// deleted") and its timeline streams on another; a connection bound to
// another conversation stays.
func TestDeleteConversationClosesItsConnections(t *testing.T) {
	s := newStack(t)
	other, _ := s.replica(t, nil, nil)
	cookie, _ := signIn(t, other, aliceKey)
	cid, kept := s.newConversation(t, aliceKey), s.newConversation(t, aliceKey)

	ws := s.dial(t, aliceKey)
	ws.bind(cid)
	wsOther := dialSession(t, other, cookie)
	wsOther.bind(cid)
	unrelated := dialSession(t, other, cookie)
	unrelated.bind(kept)
	stream := openStream(t, other, cookie, cid, "", "")
	<-stream.comments

	at := time.Now()
	s.call(t, aliceKey, "DELETE", "/v1/conversations/"+cid, nil).want(http.StatusNoContent, nil)
	here := ws.waitClosed(4404, "conversation deleted", at)
	there := wsOther.waitClosed(4404, "conversation deleted", at)
	sse := stream.waitRevoked("conversation deleted", at)
	t.Logf("deletion to close: WebSocket here %s, on another replica %s, timeline stream %s", here, there, sse)

	unrelated.alive()
	// A deleted conversation opens no stream again.
	if again := openStream(t, other, cookie, cid, "", ""); again.resp.StatusCode != http.StatusNotFound {
		t.Fatalf("timeline stream of the deleted conversation: %d, want 404", again.resp.StatusCode)
	}
}
