package persistence_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
)

// TestAgentEnvelopes: envelopes on a conversation's agent subjects are
// stored but are no stanzas (the last server stanza stays the last server
// envelope's); work items (ASRJob, SpeechAudio, AgentDispatch) on any stored
// subject, sentence audio or playout anywhere but an agent subject, and an
// utterance id that is not a string are dead-lettered with the reason, and
// hold up nothing behind them.
func TestAgentEnvelopes(t *testing.T) {
	s := newStack(t)
	s.start()
	v := newVoiceTurn("ac_agent")
	v.start(s)
	lastServer := v.sentence(s, 1)

	misplaced := []struct {
		name, subject string
		body          protocol.Body
		meta          map[string]any
		reason        string
	}{
		{"asr job", subjects.Client(v.cid, protocol.TypeASRJob), &protocol.ASRJob{ID: "aj_1", UtteranceID: "am_x", ConversationID: v.cid,
			Sequence: 1, Final: true, Format: "pcm_s16le_16000", Data: []byte{0}, DurationMs: 1, CreatedAt: 1}, nil, "work item"},
		{"speech audio", subjects.Agent(v.cid, protocol.TypeSpeechAudio), &protocol.SpeechAudio{ConversationID: v.cid, MessageID: v.answer,
			SentenceID: "ams_1", Sequence: 1, Chunk: 1, Format: "pcm_s16le_48000", Data: []byte{0, 0}}, nil, "work item"},
		{"agent dispatch", subjects.Server(v.cid, protocol.TypeAgentDispatch), &protocol.AgentDispatch{ConversationID: v.cid,
			Room: "conv_" + v.cid, RequestedAt: 1}, nil, "work item"},
		{"playout on the server subject", subjects.Server(v.cid, protocol.TypeSentencePlayout), &protocol.SentencePlayout{ConversationID: v.cid,
			MessageID: v.answer, SentenceID: "ams_1_" + v.cid, Sequence: 1, Status: protocol.SentencePlayoutStatusUnplayed}, nil, "agent"},
		{"sentence audio on a system subject", subjects.System(protocol.TypeSentenceAudio), &protocol.SentenceAudio{ConversationID: v.cid,
			MessageID: v.answer, SentenceID: "ams_1_" + v.cid, Sequence: 1, Format: "pcm_s16le_24000", DurationMs: 5, ByteSize: 240}, nil, "agent"},
		{"playing mark on the stream", subjects.Agent(v.cid, protocol.TypeSentencePlayout), &protocol.SentencePlayout{ConversationID: v.cid,
			MessageID: v.answer, SentenceID: "ams_1_" + v.cid, Sequence: 1, Status: protocol.SentencePlayoutStatusPlaying}, nil, "live mark"},
		{"utterance id not a string", subjects.Client(v.cid, protocol.TypeAudioChunk), &protocol.AudioChunk{ConversationID: v.cid,
			Format: "pcm_s16le_16000", DurationMs: 10, Sequence: 1}, map[string]any{"alicia.utterance_id": 42}, "utterance_id"},
	}
	for _, m := range misplaced {
		s.publishOn(m.subject, v.cid, m.body, m.meta)
	}
	v.audio(s, 1)
	last := s.agent(v.cid, &protocol.SentencePlayout{ConversationID: v.cid, MessageID: v.answer, SentenceID: "ams_1_" + v.cid,
		Sequence: 1, Status: protocol.SentencePlayoutStatusPlayed, PlayedMs: 1000})
	s.history(v.cid, last)

	if n := s.queryInt(`SELECT count(*) FROM alicia_sentences WHERE message_id = $1 AND playout_status = 'played' AND audio_format = 'pcm_s16le_24000'`, v.answer); n != 1 {
		t.Fatal("the agent envelopes behind the dead letters were not applied")
	}
	if n := s.queryInt(`SELECT count(*) FROM alicia_audio`); n != 0 {
		t.Fatalf("%d audio rows from dead-lettered envelopes", n)
	}
	wantServer, _ := bus.ServerStanzaID(lastServer)
	if n := s.queryInt(`SELECT last_server_stanza_id FROM alicia_conversations WHERE id = $1`, v.cid); n != int(wantServer) {
		t.Fatalf("last_server_stanza_id = %d, want %d (the last server envelope's; agent envelopes are no stanzas)", n, wantServer)
	}

	dlq, err := s.js.OrderedConsumer(context.Background(), bus.StreamDeadLetter,
		jetstream.OrderedConsumerConfig{FilterSubjects: []string{subjects.DeadLetter(s.cfg.Consumer)}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for range misplaced {
		m, err := dlq.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatalf("dead letters: %v (got %v)", err, got)
		}
		got[m.Headers().Get(bus.HeaderDLQSubject)] = m.Headers().Get(bus.HeaderDLQReason)
	}
	for _, m := range misplaced {
		t.Run(m.name, func(t *testing.T) {
			reason, ok := got[m.subject]
			if !ok {
				t.Fatalf("%s not dead-lettered (dead letters: %v)", m.subject, got)
			}
			if !strings.Contains(reason, m.reason) {
				t.Fatalf("reason %q, want it to mention %q", reason, m.reason)
			}
		})
	}
}
