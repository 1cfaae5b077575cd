package edge

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/rpc"
)

// DefaultSyncAnswerWait is how long a sync waits for the answer of one
// offline message to start before it sends the next (Options.SyncAnswerWait).
const DefaultSyncAnswerWait = 2 * time.Minute

// Conflict reasons of a SyncResponse entry (conflict.reason).
const (
	ConflictDeleted  = "deleted"          // the conversation was deleted
	ConflictPrevious = "unknown_previous" // previousId names no message of this conversation's current branch nor of the request
	ConflictRole     = "role"             // not a user message
	ConflictEmpty    = "empty"            // no localId or no text
	ConflictTooLong  = "too_long"         // over ALICIA_BUDGET_MESSAGE_CHARS
)

// syncState is what a session's running sync needs from the forwarder:
// the answers that started since it began, by their id and by the message
// they answer.
type syncState struct {
	started  map[string]chan struct{} // answer id → closed once started
	asked    map[string]chan struct{} // answered message id → closed once its answer started
	answerTo map[string]string        // answered message id → answer id
}

func newSyncState() *syncState {
	return &syncState{started: map[string]chan struct{}{}, asked: map[string]chan struct{}{}, answerTo: map[string]string{}}
}

// answerStarted is told every StartAnswer the session forwards.
func (s *Session) answerStarted(id, previousID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.syncing == nil {
		return
	}
	s.syncing.answerTo[previousID] = id
	closeIn(s.syncing.started, id)
	closeIn(s.syncing.asked, previousID)
}

// closeIn closes m[k], making it closed when absent.
func closeIn(m map[string]chan struct{}, k string) {
	ch, ok := m[k]
	if !ok {
		ch = make(chan struct{})
		m[k] = ch
	}
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// chanIn is m[k], made open when absent.
func chanIn(m map[string]chan struct{}, k string) <-chan struct{} {
	ch, ok := m[k]
	if !ok {
		ch = make(chan struct{})
		m[k] = ch
	}
	return ch
}

// waitStarted waits until the answer id has started (its StartAnswer
// forwarded), at most wait.
func (s *Session) waitStarted(ctx context.Context, id string, wait time.Duration) (bool, error) {
	s.mu.Lock()
	ch := chanIn(s.syncing.started, id)
	s.mu.Unlock()
	return waitFor(ctx, ch, wait)
}

// waitAnswerTo waits until the answer to message id has started, at most
// wait, and returns the answer's id.
func (s *Session) waitAnswerTo(ctx context.Context, id string, wait time.Duration) (string, bool, error) {
	s.mu.Lock()
	ch := chanIn(s.syncing.asked, id)
	s.mu.Unlock()
	ok, err := waitFor(ctx, ch, wait)
	if !ok {
		return "", false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.syncing.answerTo[id], true, nil
}

func waitFor(ctx context.Context, ch <-chan struct{}, wait time.Duration) (bool, error) {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ch:
		return true, nil
	case <-t.C:
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// startSync handles a SyncRequest the stream has stored: its messages are
// published one by one as UserMessages, each after the answer to the one
// before has started, then a SyncResponse is published. One sync runs at a
// time per session; it ends with the session.
func (s *Session) startSync(cid string, stanza int32, b *protocol.SyncRequest) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	if s.syncs == nil {
		s.syncs = map[int]context.CancelFunc{}
	}
	s.syncN++
	key := s.syncN
	s.syncs[key] = cancel
	s.mu.Unlock()
	go func() {
		defer func() {
			cancel()
			s.mu.Lock()
			delete(s.syncs, key)
			s.mu.Unlock()
		}()
		s.syncMu.Lock()
		defer s.syncMu.Unlock()
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		s.syncing = newSyncState()
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.syncing = nil
			s.mu.Unlock()
		}()
		if err := s.sync(ctx, cid, b); err != nil && ctx.Err() == nil {
			s.logger().Error().Err(err).Int32("stanza_id", stanza).Msg("sync offline messages")
			s.sendError(protocol.CodeBackendUnavailable, "could not sync the offline messages: "+err.Error()+"; send the SyncRequest again", nil)
		}
	}()
}

// sync applies one SyncRequest (see startSync).
func (s *Session) sync(ctx context.Context, cid string, b *protocol.SyncRequest) error {
	msgs := slices.Clone(b.Messages)
	slices.SortStableFunc(msgs, func(x, y protocol.SyncRequestMessagesElem) int {
		return cmp.Compare(x.SequenceNumber, y.SequenceNumber)
	})
	out := make([]protocol.SyncResponseSyncedMessagesElem, len(msgs))
	for i, m := range msgs {
		out[i] = protocol.SyncResponseSyncedMessagesElem{LocalID: m.LocalID, ServerID: protocol.SyncedMessageID(cid, m.LocalID)}
	}
	if err := s.auth.Authorize(ctx, s.opts.User, cid); errors.Is(err, ErrNotFound) {
		for i := range out {
			out[i].Status, out[i].Conflict = protocol.SyncResponseSyncedMessagesElemStatusConflict,
				conflict(ConflictDeleted, "the conversation was deleted: copy the text into another conversation")
		}
		return s.syncResponse(ctx, cid, out)
	} else if err != nil {
		return fmt.Errorf("check the conversation: %w", err)
	}
	branch, err := s.branch(ctx, cid)
	if err != nil {
		return err
	}
	onBranch := make(map[string]rpc.HistoryMessage, len(branch))
	for _, h := range branch {
		onBranch[h.ID] = h
	}
	var prev *string
	prevIsUser := false // the message prev names is the person's: its answer comes first
	if len(branch) > 0 {
		prev, prevIsUser = &branch[len(branch)-1].ID, branch[len(branch)-1].Role == "user"
	}
	wait := s.opts.SyncAnswerWait
	if wait <= 0 {
		wait = DefaultSyncAnswerWait
	}
	inRequest := map[string]bool{} // the request's localIds and server ids
	pending := ""                  // the answer prev names, published but not seen starting
	for i, m := range msgs {
		id := out[i].ServerID
		if stored, ok := onBranch[id]; ok {
			// Sent before (its SyncResponse was lost): the server's copy, no new turn.
			out[i].Status, out[i].Message = protocol.SyncResponseSyncedMessagesElemStatusSynced, serverCopy(stored)
			inRequest[m.LocalID], inRequest[id] = true, true
			continue
		}
		if c := s.syncConflict(cid, m, onBranch, inRequest); c != nil {
			out[i].Status, out[i].Conflict = protocol.SyncResponseSyncedMessagesElemStatusConflict, c
			continue
		}
		if err := s.followAnswer(ctx, &prev, &prevIsUser, &pending, wait); err != nil {
			return err
		}
		answer, err := s.publishSynced(ctx, cid, id, prev, m)
		if err != nil {
			return err
		}
		out[i].Status = protocol.SyncResponseSyncedMessagesElemStatusSynced
		out[i].Message = serverCopy(rpc.HistoryMessage{ID: id, PreviousID: deref(prev), Role: "user", Contents: m.Contents,
			CreatedAt: time.UnixMilli(m.CreatedAt)})
		inRequest[m.LocalID], inRequest[id] = true, true
		// The next message follows this one's answer, as if the person had
		// waited for it (followAnswer).
		prev, pending = &answer, answer
	}
	return s.syncResponse(ctx, cid, out)
}

// followAnswer makes prev, the message the next synced one follows, an
// answer that has started: the answer pending (to the message synced
// before) or, when prev is a message of the person's whose answer has not
// started (sent just before going offline, or synced by a request whose
// SyncResponse was lost), that answer. Without a start within wait, prev is
// cleared: the message follows the branch head, whatever it is then.
func (s *Session) followAnswer(ctx context.Context, prev **string, prevIsUser *bool, pending *string, wait time.Duration) error {
	switch {
	case *pending != "":
		ok, err := s.waitStarted(ctx, *pending, wait)
		if err != nil {
			return err
		}
		if !ok {
			*prev = nil
			s.logger().Warn().Str("answer_id", *pending).Dur("waited", wait).Msg("the answer to a synced message did not start in time; the next one follows the branch head")
		}
		*pending = ""
	case *prevIsUser:
		answer, ok, err := s.waitAnswerTo(ctx, **prev, wait)
		if err != nil {
			return err
		}
		if ok {
			*prev = &answer
		} else {
			*prev = nil
			s.logger().Warn().Dur("waited", wait).Msg("the branch's last message got no answer in time; the synced message follows the branch head")
		}
		*prevIsUser = false
	}
	return nil
}

// syncConflict says why message m cannot be applied, or nil.
func (s *Session) syncConflict(cid string, m protocol.SyncRequestMessagesElem, onBranch map[string]rpc.HistoryMessage, inRequest map[string]bool) protocol.SyncResponseSyncedMessagesElemConflict {
	switch {
	case m.Role != "user":
		return conflict(ConflictRole, "only the person's own messages are synced")
	case m.LocalID == "" || strings.TrimSpace(m.Contents) == "":
		return conflict(ConflictEmpty, "the message is empty: discard it")
	}
	if o := CheckText(BudgetMessage, "contents", m.Contents, s.budgets.MessageChars); o != nil {
		c := conflict(ConflictTooLong, fmt.Sprintf("the message is longer than %d characters: shorten it and send it again", s.budgets.MessageChars))
		c["limit"] = s.budgets.MessageChars
		return c
	}
	if p := deref(m.PreviousID); p != "" {
		_, ok := onBranch[p]
		if _, synced := onBranch[protocol.SyncedMessageID(cid, p)]; !ok && !synced && !inRequest[p] { // a localId synced before counts
			c := conflict(ConflictPrevious, "the message follows one this conversation no longer shows (another branch or another conversation): send it again as a new message")
			c["previousId"] = p
			return c
		}
	}
	return nil
}

// publishSynced publishes an offline message as a UserMessage (a new turn
// of the llm), tells the client, and returns the id its answer will have.
func (s *Session) publishSynced(ctx context.Context, cid, id string, prev *string, m protocol.SyncRequestMessagesElem) (string, error) {
	localID, at := m.LocalID, m.CreatedAt
	um := &protocol.UserMessage{ID: id, ConversationID: cid, Content: m.Contents, LocalID: &localID, Timestamp: &at, PreviousID: prev}
	env := protocol.New(cid, um)
	env.Meta = clientMeta(nil, s.opts.User)
	// The answer may start before the PubAck is read: its StartAnswer is
	// recorded from now on (answerStarted).
	ack, err := s.pub.PublishOnBehalf(ctx, env, cid+":sync:"+localID)
	if err != nil {
		return "", fmt.Errorf("publish the message: %w", err)
	}
	if frame, err := protocol.Encode(env); err == nil {
		s.enqueue(frame) // the client learns the server id and place before the answer
	}
	return protocol.AnswerID(cid, ack.Sequence), nil
}

// branch reads the conversation's current branch once persistence has
// applied everything in the stream (an earlier sync's messages included).
func (s *Session) branch(ctx context.Context, cid string) ([]rpc.HistoryMessage, error) {
	st, err := s.js.Stream(ctx, bus.StreamConversations)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", bus.StreamConversations, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", bus.StreamConversations, err)
	}
	resp, err := rpc.History(ctx, s.js.Conn(), rpc.HistoryRequest{ConversationID: cid, MinSequence: info.State.LastSeq})
	if err != nil {
		return nil, fmt.Errorf("read the conversation (history.get): %w", err)
	}
	return resp.Messages, nil
}

// syncResponse publishes the SyncResponse through the stream, so a client
// that reconnects before reading it gets it with what it missed.
func (s *Session) syncResponse(ctx context.Context, cid string, out []protocol.SyncResponseSyncedMessagesElem) error {
	env := protocol.New(cid, &protocol.SyncResponse{SyncedAt: time.Now().UnixMilli(), SyncedMessages: out})
	if _, err := s.pub.PublishServer(ctx, env, ""); err != nil {
		return fmt.Errorf("publish the SyncResponse: %w", err)
	}
	return nil
}

func conflict(reason, what string) protocol.SyncResponseSyncedMessagesElemConflict {
	return protocol.SyncResponseSyncedMessagesElemConflict{"reason": reason, "message": what}
}

// serverCopy is a message as SyncResponse.syncedMessages[].message carries it.
func serverCopy(m rpc.HistoryMessage) protocol.SyncResponseSyncedMessagesElemMessage {
	c := protocol.SyncResponseSyncedMessagesElemMessage{"id": m.ID, "role": m.Role, "content": m.Contents, "createdAt": m.CreatedAt.UnixMilli()}
	if m.PreviousID != "" {
		c["previousId"] = m.PreviousID
	}
	return c
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
