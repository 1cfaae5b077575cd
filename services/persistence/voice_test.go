package persistence_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
)

// publishOn publishes an envelope on subject as given (no publisher rules)
// and returns its stream sequence.
func (s *stack) publishOn(subject, cid string, body protocol.Body, meta map[string]any) uint64 {
	s.t.Helper()
	data, err := protocol.Encode(protocol.Envelope{ConversationID: cid, Type: body.MessageType(), Meta: meta, Body: body})
	if err != nil {
		s.t.Fatal(err)
	}
	ack, err := s.js.Publish(context.Background(), subject, data)
	if err != nil {
		s.t.Fatal(err)
	}
	return ack.Sequence
}

// agent publishes an internal envelope on alicia.conv.{cid}.agent.{type}, as tts and the room-agent do.
func (s *stack) agent(cid string, body protocol.Body) uint64 {
	s.t.Helper()
	return s.publishOn(subjects.Agent(cid, body.MessageType()), cid, body, nil)
}

// voiceTurn is an answer spoken sentence by sentence and cut by a barge-in:
// sentence 1 played, 2 interrupted, 3 never played, 4 generated before the
// stop landed and never synthesised, the stop, then a 5th that was on its
// way. The user heard sentences 1 and 2.
type voiceTurn struct {
	cid, user, answer string
	texts             []string
}

const (
	heardContents     = "One fish. Two fish."
	generatedContents = "One fish. Two fish. Red fish. Blue fish. Old fish."
)

func newVoiceTurn(cid string) *voiceTurn {
	return &voiceTurn{cid: cid, user: "am_vu_" + cid, answer: "am_va_" + cid,
		texts: []string{"One fish.", "Two fish.", "Red fish.", "Blue fish.", "Old fish."}}
}

// sentenceID is the protocol id of sentence seq; sentence 3 has none (its
// row id is derived), and tts names it by a guess of its own.
func (v *voiceTurn) sentenceID(seq int32) *string {
	if seq == 3 {
		return nil
	}
	return ptr(fmt.Sprintf("ams_%d_%s", seq, v.cid))
}

func (v *voiceTurn) start(s *stack) {
	s.client(v.cid, 1, &protocol.UserMessage{ID: v.user, ConversationID: v.cid, Content: "Read me a poem."}, map[string]any{"alicia.user_id": "user-1"})
	s.server(v.cid, &protocol.StartAnswer{ID: v.answer, PreviousID: v.user, ConversationID: v.cid,
		AnswerType: ptr(protocol.StartAnswerAnswerTypeTextVoice)}, nil)
}

func (v *voiceTurn) sentence(s *stack, seq int32) uint64 {
	return s.server(v.cid, &protocol.AssistantSentence{ID: v.sentenceID(seq), PreviousID: v.answer, ConversationID: v.cid,
		Sequence: seq, Text: v.texts[seq-1]}, nil)
}

func (v *voiceTurn) audio(s *stack, seq int32) uint64 {
	id := "ams_tts_guess_" + v.cid
	if p := v.sentenceID(seq); p != nil {
		id = *p
	}
	b := &protocol.SentenceAudio{ConversationID: v.cid, MessageID: v.answer, SentenceID: id, Sequence: seq,
		Format: "pcm_s16le_24000", DurationMs: 1000 * seq, ByteSize: 48000 * seq, Engine: ptr("espeak")}
	if seq == 1 {
		b.Data = []byte{1, 2, 3, 4}
	}
	return s.agent(v.cid, b)
}

var voicePlayouts = []struct {
	seq    int32
	status protocol.SentencePlayoutStatus
	ms     int32
}{{1, protocol.SentencePlayoutStatusPlayed, 1000}, {2, protocol.SentencePlayoutStatusInterrupted, 700}, {3, protocol.SentencePlayoutStatusUnplayed, 0}}

func (v *voiceTurn) playout(s *stack, i int) uint64 {
	p := voicePlayouts[i]
	id := ""
	if sid := v.sentenceID(p.seq); sid != nil {
		id = *sid
	}
	return s.agent(v.cid, &protocol.SentencePlayout{ConversationID: v.cid, MessageID: v.answer, SentenceID: id, Sequence: p.seq,
		Status: p.status, PlayedMs: p.ms})
}

func (v *voiceTurn) stop(s *stack) uint64 {
	return s.client(v.cid, 2, &protocol.ControlStop{ConversationID: v.cid, TargetID: &v.answer,
		StopType: ptr(protocol.ControlStopStopTypeSpeech), Reason: ptr("barge-in")}, nil)
}

// publishInOrder publishes the turn in stream order: each sentence, then its audio, its playout.
func (v *voiceTurn) publishInOrder(s *stack) uint64 {
	v.start(s)
	for seq := int32(1); seq <= 3; seq++ {
		v.sentence(s, seq)
		v.audio(s, seq)
	}
	v.sentence(s, 4)
	for i := range voicePlayouts {
		v.playout(s, i)
	}
	v.stop(s)
	return v.sentence(s, 5)
}

// publishReversed publishes every audio and playout before any sentence.
func (v *voiceTurn) publishReversed(s *stack) uint64 {
	v.start(s)
	for seq := int32(1); seq <= 3; seq++ {
		v.audio(s, seq)
	}
	for i := range voicePlayouts {
		v.playout(s, i)
	}
	for seq := int32(1); seq <= 4; seq++ {
		v.sentence(s, seq)
	}
	v.stop(s)
	return v.sentence(s, 5)
}

type sentenceRow struct {
	seq                     int
	text, status, audioType string
	format                  string
	duration, bytes         int
	data                    string
	engine                  string
	playout                 string
	playedMs                int
	playedAt                bool
}

func readSentences(t *testing.T, s *stack, message string) []sentenceRow {
	t.Helper()
	rows, err := s.pool.Query(context.Background(), `SELECT sentence_sequence_number, text, completion_status::text,
			COALESCE(audio_type::text, ''), COALESCE(audio_format, ''), COALESCE(duration_ms, 0), COALESCE(audio_bytesize, 0),
			COALESCE(encode(audio_data, 'hex'), ''), COALESCE(meta->>'engine', ''), playout_status::text, COALESCE(played_ms, -1), played_at IS NOT NULL
		FROM alicia_sentences WHERE message_id = $1 ORDER BY sentence_sequence_number`, message)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []sentenceRow
	for rows.Next() {
		var r sentenceRow
		if err := rows.Scan(&r.seq, &r.text, &r.status, &r.audioType, &r.format, &r.duration, &r.bytes, &r.data, &r.engine,
			&r.playout, &r.playedMs, &r.playedAt); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func (v *voiceTurn) wantSentences() []sentenceRow {
	return []sentenceRow{
		{1, v.texts[0], "completed", "output", "pcm_s16le_24000", 1000, 48000, "01020304", "espeak", "played", 1000, true},
		{2, v.texts[1], "completed", "output", "pcm_s16le_24000", 2000, 96000, "", "espeak", "interrupted", 700, true},
		{3, v.texts[2], "completed", "output", "pcm_s16le_24000", 3000, 144000, "", "espeak", "unplayed", 0, false},
		{4, v.texts[3], "completed", "", "", 0, 0, "", "", "pending", -1, false},
		{5, v.texts[4], "completed", "", "", 0, 0, "", "", "pending", -1, false},
	}
}

// TestBargeInKeepsWhatWasHeard: the sentences' audio fields and playout are
// stored, and the answer's contents become what the user heard — in stream
// order or with audio and playout before their sentences, applied live or
// all in one batch — while generated_contents keeps the whole answer.
func TestBargeInKeepsWhatWasHeard(t *testing.T) {
	s := newStack(t)
	type tcase struct {
		name    string
		reverse bool
		batch   bool
		v       *voiceTurn
		last    uint64
	}
	var cases []*tcase
	for i, name := range []string{"stream order live", "audio and playout first live", "stream order in one batch", "audio and playout first in one batch"} {
		cases = append(cases, &tcase{name: name, reverse: i%2 == 1, batch: i >= 2, v: newVoiceTurn(fmt.Sprintf("ac_voice%d", i))})
	}
	publish := func(c *tcase) {
		if c.reverse {
			c.last = c.v.publishReversed(s)
		} else {
			c.last = c.v.publishInOrder(s)
		}
	}
	s.start()
	for _, c := range cases {
		if !c.batch {
			publish(c)
		}
	}
	s.history(cases[1].v.cid, cases[1].last)
	s.stop()
	for _, c := range cases {
		if c.batch {
			publish(c)
		}
	}
	s.start()

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := c.v
			h := s.history(v.cid, c.last)
			if len(h.Messages) != 2 || h.Messages[1].ID != v.answer || h.Messages[1].Contents != heardContents {
				t.Fatalf("history = %+v, want the answer as heard: %q", h.Messages, heardContents)
			}
			if got, want := readSentences(t, s, v.answer), v.wantSentences(); !reflect.DeepEqual(got, want) {
				t.Fatalf("sentences:\n got %+v\nwant %+v", got, want)
			}
			var contents, generated, status string
			var interrupted bool
			err := s.pool.QueryRow(context.Background(), `SELECT contents, COALESCE(generated_contents, '<null>'), completion_status::text,
				interrupted_at IS NOT NULL FROM alicia_messages WHERE id = $1`, v.answer).Scan(&contents, &generated, &status, &interrupted)
			if err != nil {
				t.Fatal(err)
			}
			if contents != heardContents || generated != generatedContents || status != "completed" || !interrupted {
				t.Fatalf("answer: contents %q generated %q status %s interrupted %v", contents, generated, status, interrupted)
			}
			if n := s.queryInt(`SELECT count(*) FROM alicia_sentences WHERE id = $1`, "ams_tts_guess_"+v.cid); n != 0 {
				t.Fatalf("sentence 3 kept the id tts guessed, want the sentence's own")
			}
		})
	}
}

// TestPlayoutWithoutCut: an answer played to the end keeps its whole
// contents and no generated_contents; a playout repeated under a new
// sequence changes nothing; a later playout of the same sentence wins.
func TestPlayoutWithoutCut(t *testing.T) {
	s := newStack(t)
	s.start()
	v := newVoiceTurn("ac_voiceplayed")
	v.start(s)
	for seq := int32(1); seq <= 2; seq++ {
		v.sentence(s, seq)
		v.audio(s, seq)
		v.agent(s, seq, protocol.SentencePlayoutStatusPlayed)
	}
	updatedAt := func(seq uint64) string {
		t.Helper()
		s.history(v.cid, seq)
		var at string
		if err := s.pool.QueryRow(context.Background(), `SELECT updated_at::text || playout_seq::text FROM alicia_sentences
			WHERE message_id = $1 AND sentence_sequence_number = 2`, v.answer).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	updated1 := updatedAt(v.agent(s, 1, protocol.SentencePlayoutStatusPlayed))
	last := v.agent(s, 2, protocol.SentencePlayoutStatusPlayed) // the same playout again
	if updatedAt(last) != updated1 {
		t.Fatal("a repeated playout changed the sentence")
	}
	h := s.history(v.cid, last)
	if got := h.Messages[1].Contents; got != "One fish. Two fish." {
		t.Fatalf("contents %q, want the whole answer", got)
	}
	if n := s.queryInt(`SELECT count(*) FROM alicia_messages WHERE id = $1 AND generated_contents IS NULL`, v.answer); n != 1 {
		t.Fatal("generated_contents set on an answer that was not cut")
	}

	// The room-agent corrects itself: sentence 2 was cut after all.
	last = v.agent(s, 2, protocol.SentencePlayoutStatusInterrupted)
	h = s.history(v.cid, last)
	if got := h.Messages[1].Contents; got != "One fish. Two fish." {
		t.Fatalf("contents %q after the interruption of the last sentence", got)
	}
	if updatedAt(last) == updated1 {
		t.Fatal("a newer playout did not change the sentence")
	}
	if n := s.queryInt(`SELECT count(*) FROM alicia_sentences WHERE message_id = $1 AND sentence_sequence_number = 2 AND playout_status = 'interrupted'`, v.answer); n != 1 {
		t.Fatal("sentence 2 is not interrupted")
	}
	if n := s.queryInt(`SELECT count(*) FROM alicia_messages WHERE id = $1 AND generated_contents = contents`, v.answer); n != 1 {
		t.Fatal("a cut answer with nothing unheard: generated_contents should equal contents")
	}
}

func (v *voiceTurn) agent(s *stack, seq int32, status protocol.SentencePlayoutStatus) uint64 {
	return s.agent(v.cid, &protocol.SentencePlayout{ConversationID: v.cid, MessageID: v.answer, SentenceID: *v.sentenceID(seq),
		Sequence: seq, Status: status, PlayedMs: 1000 * seq})
}

// TestStopAfterTheAnswer: a barge-in (speech stop) marks an answer whose
// generation had ended as interrupted — its playout was cut — while a
// generation stop leaves a completed answer alone, and a failed answer stays
// failed.
func TestStopAfterTheAnswer(t *testing.T) {
	s := newStack(t)
	s.start()
	cases := []struct {
		name        string
		stopType    protocol.ControlStopStopType
		fail        bool
		status      string
		interrupted bool
	}{
		{"speech after completion", protocol.ControlStopStopTypeSpeech, false, "completed", true},
		{"generation after completion", protocol.ControlStopStopTypeGeneration, false, "completed", false},
		{"speech after failure", protocol.ControlStopStopTypeSpeech, true, "failed", false},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := newVoiceTurn(fmt.Sprintf("ac_stopafter%d", i))
			v.start(s)
			s.server(v.cid, &protocol.AssistantSentence{PreviousID: v.answer, ConversationID: v.cid, Sequence: 1, Text: "Done.", IsFinal: ptr(!c.fail)}, nil)
			if c.fail {
				s.server(v.cid, &protocol.ErrorMessage{ID: "ae_" + v.cid, ConversationID: v.cid, Code: protocol.CodeBackendUnavailable,
					Message: "down", OriginatingID: &v.answer, Recoverable: true, Severity: 2}, nil)
			}
			stop := &protocol.ControlStop{ConversationID: v.cid, TargetID: &v.answer, StopType: &c.stopType}
			s.client(v.cid, 2, stop, nil)
			last := s.client(v.cid, 3, stop, nil) // the same stop again changes nothing
			s.history(v.cid, last)
			if got := readMessage(t, s, v.answer); got.status != c.status || got.interrupted != c.interrupted || got.contents != "Done." {
				t.Fatalf("answer %+v, want status %s interrupted %v", got, c.status, c.interrupted)
			}
		})
	}
}
