package agent

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// sessionStats counts a voice session (from the agent joining the room to
// it leaving) from the conversation's server envelopes it follows: the
// messages of the turns answered (each question and its answer), the tool
// calls and the memories the answers used. At the end it is the
// conversation's SessionStats (type 27), stored by persistence and shown
// with the conversation.
type sessionStats struct {
	mu       sync.Mutex
	began    time.Time
	answers  map[string]bool // answers begun, and the messages they answer
	asked    map[string]bool
	tools    map[string]bool
	memories map[string]bool
	once     sync.Once
}

// saw counts body, a server envelope of the conversation.
func (s *sessionStats) saw(body protocol.Body) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.answers == nil {
		s.answers, s.asked, s.tools, s.memories = map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	}
	switch b := body.(type) {
	case *protocol.StartAnswer:
		s.answers[b.ID] = true
		s.asked[b.PreviousID] = true
	case *protocol.ToolUseRequest:
		s.tools[b.ID] = true
	case *protocol.MemoryTrace:
		s.memories[b.ID] = true
	}
}

// body is the SessionStats of the session so far, at now.
func (s *sessionStats) body(now time.Time) *protocol.SessionStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &protocol.SessionStats{MessageCount: int32(len(s.answers) + len(s.asked)), ToolCallCount: int32(len(s.tools)),
		MemoriesUsed: int32(len(s.memories)), SessionDurationMs: now.Sub(s.began).Milliseconds()}
}

// publishStats publishes the session's SessionStats once, when the agent
// leaves (its Nats-Msg-Id names the session: a retry is one record).
func (r *Room) publishStats() {
	r.stats.once.Do(func() {
		b := r.stats.body(time.Now())
		env := protocol.New(r.cid, b)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), 5*time.Second)
		defer cancel()
		msgID := r.cid + ":session:" + strconv.FormatInt(r.stats.began.UnixMilli(), 10)
		if _, err := r.pub.PublishServer(ctx, env, msgID); err != nil {
			r.log.Warn().Err(err).Msg("publish session stats")
			return
		}
		r.log.Info().Int32("messages", b.MessageCount).Int32("tool_calls", b.ToolCallCount).Int32("memories_used", b.MemoriesUsed).
			Int64("duration_ms", b.SessionDurationMs).Msg("voice session ended")
	})
}
