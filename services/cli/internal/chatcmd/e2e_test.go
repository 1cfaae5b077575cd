package chatcmd_test

import (
	"context"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/testkit"
	"github.com/alicia-voice/alicia/services/cli/internal/api"
	"github.com/alicia-voice/alicia/services/cli/internal/chatcmd"
	"github.com/alicia-voice/alicia/services/cli/internal/stacktest"
)

// TestChatThroughTheGateway holds a conversation through the real gateway:
// the user's messages reach Postgres, the answer published as the llm would
// is printed, and a second session resuming the conversation a moment later
// is not mistaken by JetStream's de-duplication for the first one.
func TestChatThroughTheGateway(t *testing.T) {
	s := stacktest.Start(t)
	client, err := api.New(s.Base, stacktest.AliceKey)
	if err != nil {
		t.Fatal(err)
	}
	cid := ""
	for i, line := range []string{"hello there", "second visit"} {
		pr, pw := io.Pipe()
		out, errOut := &testkit.SyncBuffer{}, &testkit.SyncBuffer{}
		done := make(chan error, 1)
		go func() {
			done <- chatcmd.Run(context.Background(), chatcmd.Options{API: client, ConversationID: cid, In: pr, Out: out, Err: errOut})
		}()
		if cid == "" {
			testkit.Eventually(t, 10*time.Second, func() bool { return strings.Contains(errOut.String(), "New conversation") }, "the new conversation")
			cid = regexp.MustCompile(`ac_\w+`).FindString(errOut.String())
		}
		if _, err := io.WriteString(pw, line+"\n"); err != nil {
			t.Fatal(err)
		}
		pw.Close()
		var uid string
		testkit.Eventually(t, 10*time.Second, func() bool {
			err := s.Pool.QueryRow(context.Background(), `SELECT m.id FROM alicia_messages m JOIN alicia_conversations c ON c.id = m.conversation_id
				WHERE m.conversation_id = $1 AND m.contents = $2 AND m.message_role = 'user' AND c.user_id = 'alice'`, cid, line).Scan(&uid)
			return err == nil
		}, "session %d: %q in Postgres", i+1, line)
		aid := protocol.NewID("am")
		for _, body := range []protocol.Body{
			&protocol.StartAnswer{ID: aid, PreviousID: uid, ConversationID: cid},
			&protocol.AssistantSentence{PreviousID: aid, ConversationID: cid, Sequence: 1, Text: "Hi."},
			&protocol.AssistantSentence{PreviousID: aid, ConversationID: cid, Sequence: 2, Text: "Bye.", IsFinal: protocol.Ptr(true)},
		} {
			if _, err := s.Pub.PublishServer(context.Background(), protocol.New(cid, body), ""); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("session %d did not end after its answer", i+1)
		}
		if got := out.String(); got != "you> "+line+"\nalicia> Hi. Bye.\n" {
			t.Fatalf("session %d printed %q", i+1, got)
		}
	}
}
