package turn

import (
	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
)

// resume reads what an earlier try of this turn (on a replica that died or
// gave it back) published, and sets the answer up to go on after it: the
// sentences already out stay, the model continues from them. done: the
// earlier try finished (final sentence, AssistantMessage, ErrorMessage or a
// stop), nothing is left to do.
func (t *turn) resume() (done bool, err error) {
	id := t.p.assistantID
	sentences := map[int32]string{}
	var reasoning int32
	err = bus.Replay(t.ctx, t.e.d.NC, bus.StreamConversations, subjects.Conversation(t.cid), t.q.Sequence+1, func(s bus.Stored) error {
		env, err := protocol.Decode(s.Data)
		if err != nil {
			return nil
		}
		switch b := env.Body.(type) {
		case *protocol.AssistantSentence:
			if b.PreviousID == id {
				sentences[b.Sequence] = b.Text
				done = done || (b.IsFinal != nil && *b.IsFinal)
			}
		case *protocol.AssistantMessage:
			done = done || b.ID == id
		case *protocol.ErrorMessage:
			done = done || (b.OriginatingID != nil && *b.OriginatingID == id)
		case *protocol.ControlStop:
			done = done || (b.TargetID != nil && *b.TargetID == id)
		case *protocol.ReasoningStep:
			if b.MessageID == id {
				reasoning = max(reasoning, b.Sequence)
			}
		}
		return nil
	})
	if err != nil || done {
		return done, err
	}
	var texts []string
	for i := int32(1); ; i++ {
		s, ok := sentences[i]
		if !ok {
			break
		}
		texts = append(texts, s)
	}
	if t.ans.streaming && len(texts) > 0 {
		t.ans.resumeAfter(texts)
	}
	t.ans.rseq = reasoning
	if len(texts) > 0 || reasoning > 0 || t.q.Delivered > 1 {
		t.log.Info().Int("sentences", len(texts)).Msg("resuming a turn an earlier try left unfinished")
	}
	return false, nil
}
