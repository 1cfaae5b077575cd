package persistence_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
)

// flow publishes one whole exchange as envelopes: configuration,
// transcriptions, the question, a memory and its use, the streamed answer
// with a tool use and a reasoning step, feedback and a note. The answer is
// published in two halves so the streaming state can be observed.
type flow struct {
	cid                string
	user, answer       string
	firstHalf, lastSeq uint64
	lastClient         int32
	lastServerSeq      uint64
}

const (
	traceID = "0af7651916cd43dd8448eb211c80319c"
	spanID  = "b7ad6b7169203331"
)

func publishFlow(s *stack, cid string) *flow {
	f := &flow{cid: cid, user: "am_user_" + cid, answer: "am_answer_" + cid}
	traced := map[string]any{"messaging.trace_id": traceID, "messaging.span_id": spanID}

	s.client(cid, 1, &protocol.Configuration{ClientVersion: ptr("1.0.0"), PreferredLanguage: ptr("en"), Features: []protocol.ConfigurationFeaturesElem{protocol.ConfigurationFeaturesElemStreaming}}, map[string]any{"alicia.user_id": "user-1"})
	s.server(cid, &protocol.Transcription{ID: f.user, ConversationID: cid, Text: "What is the", Final: false}, nil)
	s.server(cid, &protocol.Transcription{ID: f.user, ConversationID: cid, Text: "What is the weather in Paris?", Final: true, Confidence: ptr(0.93), Language: ptr("en")}, nil)
	s.client(cid, 2, &protocol.UserMessage{ID: f.user, ConversationID: cid, Content: "What is the weather in Paris?"}, map[string]any{"source": "microphone", "messaging.trace_id": traceID, "messaging.span_id": spanID})
	s.client(cid, 3, &protocol.MemoryAction{ID: "amem_paris_" + cid, Action: "create", Memory: &protocol.MemoryActionMemory{Content: "The user lives in Paris", Tags: []string{"location"}}, Timestamp: 1700000000000}, map[string]any{"alicia.user_id": "user-1"})
	s.server(cid, &protocol.MemoryTrace{ID: "amu_1_" + cid, MessageID: f.user, ConversationID: cid, MemoryID: "amem_paris_" + cid, Content: "The user lives in Paris", Relevance: 0.87}, traced)
	s.server(cid, &protocol.StartAnswer{ID: f.answer, PreviousID: f.user, ConversationID: cid, AnswerType: ptr(protocol.StartAnswerAnswerType("text"))}, traced)
	s.server(cid, &protocol.AssistantSentence{PreviousID: f.answer, ConversationID: cid, Sequence: 1, Text: "Let me check."}, nil)
	f.firstHalf = s.server(cid, &protocol.AssistantSentence{ID: ptr("ams_2_" + cid), PreviousID: f.answer, ConversationID: cid, Sequence: 2, Text: "It is sunny in Paris."}, nil)
	return f
}

func finishFlow(s *stack, f *flow) {
	cid := f.cid
	s.server(cid, &protocol.ToolUseRequest{ID: "atu_1_" + cid, MessageID: f.answer, ConversationID: cid, ToolName: "weather", Parameters: map[string]any{"city": "Paris"}, Execution: "server"}, nil)
	s.server(cid, &protocol.ToolUseResult{ID: "atr_1_" + cid, RequestID: "atu_1_" + cid, ConversationID: cid, Success: true, Result: map[string]any{"sky": "sunny", "celsius": 21}}, nil)
	s.server(cid, &protocol.ReasoningStep{ID: "ar_1_" + cid, MessageID: f.answer, ConversationID: cid, Sequence: 1, Content: "The weather tool says sunny."}, nil)
	f.lastServerSeq = s.server(cid, &protocol.AssistantSentence{PreviousID: f.answer, ConversationID: cid, Sequence: 3, Text: "Enjoy your day!", IsFinal: ptr(true)}, map[string]any{"model": "qwen2.5-7b-instruct"})
	s.client(cid, 4, &protocol.Feedback{ID: "av_1_" + cid, ConversationID: cid, MessageID: f.answer, TargetType: "message", TargetID: f.answer, Vote: "up", Timestamp: 1700000001000}, map[string]any{"alicia.user_id": "user-1"})
	f.lastSeq = s.client(cid, 5, &protocol.UserNote{ID: "an_1_" + cid, MessageID: f.answer, Content: "Mention the temperature", Category: "improvement", Action: "create", Timestamp: 1700000002000}, nil)
	f.lastClient = 5
}

func TestMessageFlowExample(t *testing.T) {
	s := newStack(t)
	s.start()
	const cid = "ac_flow"
	f := publishFlow(s, cid)

	// Mid-answer: the assistant row exists, is streaming, holds what has been said so far.
	h := s.history(cid, f.firstHalf)
	if len(h.Messages) != 2 || h.Messages[0].ID != f.user || h.Messages[1].ID != f.answer {
		t.Fatalf("history mid-answer = %+v", h.Messages)
	}
	if got := h.Messages[1]; got.CompletionStatus != "streaming" || got.Contents != "Let me check. It is sunny in Paris." {
		t.Fatalf("answer mid-stream = %+v", got)
	}

	finishFlow(s, f)
	h = s.history(cid, f.lastSeq)
	if h.AppliedSequence < f.lastSeq {
		t.Fatalf("applied %d < %d", h.AppliedSequence, f.lastSeq)
	}
	ctx := context.Background()

	t.Run("conversation", func(t *testing.T) {
		var room, user, tip string
		var lastClient, lastServer int32
		var prefs []byte
		err := s.pool.QueryRow(ctx, `SELECT livekit_room_name, user_id, tip_message_id, last_client_stanza_id, last_server_stanza_id, preferences
			FROM alicia_conversations WHERE id = $1`, cid).Scan(&room, &user, &tip, &lastClient, &lastServer, &prefs)
		if err != nil {
			t.Fatal(err)
		}
		wantServer, _ := bus.ServerStanzaID(f.lastServerSeq)
		if room != "conv_"+cid || user != "user-1" || tip != f.answer || lastClient != f.lastClient || lastServer != wantServer {
			t.Fatalf("conversation = room %q user %q tip %q client %d server %d (want server %d)", room, user, tip, lastClient, lastServer, wantServer)
		}
		var p map[string]any
		_ = json.Unmarshal(prefs, &p)
		if p["preferredLanguage"] != "en" || p["clientVersion"] != "1.0.0" {
			t.Fatalf("preferences = %s", prefs)
		}
	})

	t.Run("messages", func(t *testing.T) {
		rows, err := s.pool.Query(ctx, `SELECT id, message_role::text, contents, completion_status::text, sequence_number, COALESCE(previous_id, '')
			FROM alicia_messages WHERE conversation_id = $1 ORDER BY sequence_number`, cid)
		if err != nil {
			t.Fatal(err)
		}
		type msg struct {
			id, role, contents, status string
			seq                        int
			prev                       string
		}
		var got []msg
		for rows.Next() {
			var m msg
			if err := rows.Scan(&m.id, &m.role, &m.contents, &m.status, &m.seq, &m.prev); err != nil {
				t.Fatal(err)
			}
			got = append(got, m)
		}
		want := []msg{
			{f.user, "user", "What is the weather in Paris?", "completed", 1, ""},
			{f.answer, "assistant", "Let me check. It is sunny in Paris. Enjoy your day!", "completed", 2, f.user},
		}
		if len(got) != len(want) {
			t.Fatalf("messages = %+v", got)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("message %d = %+v, want %+v", i, got[i], want[i])
			}
		}
	})

	t.Run("sentences", func(t *testing.T) {
		rows, err := s.pool.Query(ctx, `SELECT id, sentence_sequence_number, text, completion_status::text FROM alicia_sentences
			WHERE message_id = $1 ORDER BY sentence_sequence_number`, f.answer)
		if err != nil {
			t.Fatal(err)
		}
		var texts []string
		for rows.Next() {
			var id, text, status string
			var seq int
			if err := rows.Scan(&id, &seq, &text, &status); err != nil {
				t.Fatal(err)
			}
			if seq != len(texts)+1 || status != "completed" || id == "" {
				t.Errorf("sentence %d: id %q seq %d status %s", len(texts)+1, id, seq, status)
			}
			if seq == 2 && id != "ams_2_"+cid {
				t.Errorf("sentence 2 id = %q, want the protocol id", id)
			}
			texts = append(texts, text)
		}
		if len(texts) != 3 || texts[2] != "Enjoy your day!" {
			t.Fatalf("sentences = %q", texts)
		}
	})

	t.Run("tool use", func(t *testing.T) {
		var status, name string
		var args, result []byte
		var seq int
		var completed bool
		err := s.pool.QueryRow(ctx, `SELECT status::text, tool_name, tool_arguments, tool_result, sequence_number, completed_at IS NOT NULL
			FROM alicia_tool_uses WHERE id = $1 AND message_id = $2`, "atu_1_"+cid, f.answer).Scan(&status, &name, &args, &result, &seq, &completed)
		if err != nil {
			t.Fatal(err)
		}
		var r map[string]any
		_ = json.Unmarshal(result, &r)
		if status != "success" || name != "weather" || seq != 1 || !completed || r["sky"] != "sunny" || string(args) != `{"city": "Paris"}` {
			t.Fatalf("tool use = %s %s %s %s seq %d completed %v", status, name, args, result, seq, completed)
		}
	})

	t.Run("rows by type", func(t *testing.T) {
		for _, c := range []struct {
			name, sql string
			args      []any
			want      int
		}{
			{"reasoning", `SELECT count(*) FROM alicia_reasoning_steps WHERE message_id = $1 AND sequence_number = 1`, []any{f.answer}, 1},
			{"memory", `SELECT count(*) FROM alicia_memory WHERE id = $1 AND content = 'The user lives in Paris' AND tags = '{location}'`, []any{"amem_paris_" + cid}, 1},
			{"memory used", `SELECT count(*) FROM alicia_memory_used WHERE id = $1 AND message_id = $2 AND memory_id = $3 AND abs(similarity_score - 0.87) < 1e-6`, []any{"amu_1_" + cid, f.user, "amem_paris_" + cid}, 1},
			{"vote", `SELECT count(*) FROM alicia_votes WHERE id = $1 AND vote = 'up' AND target_id = $2 AND user_id = 'user-1'`, []any{"av_1_" + cid, f.answer}, 1},
			{"note", `SELECT count(*) FROM alicia_notes WHERE id = $1 AND category = 'improvement' AND message_id = $2`, []any{"an_1_" + cid, f.answer}, 1},
			{"input audio", `SELECT count(*) FROM alicia_audio a JOIN alicia_messages m ON m.audio_id = a.id AND a.message_id = m.id
				WHERE m.id = $1 AND a.audio_type = 'input' AND a.transcription = 'What is the weather in Paris?'
				AND a.transcription_meta->>'language' = 'en'`, []any{f.user}, 1},
			{"no audio for partials", `SELECT count(*) FROM alicia_audio`, nil, 1},
			{"meta source", `SELECT count(*) FROM alicia_meta WHERE ref = $1 AND key = 'source' AND value = 'microphone'`, []any{f.user}, 1},
			{"trace column", `SELECT count(*) FROM alicia_messages WHERE id = $1 AND trace_id = $2`, []any{f.answer, traceID}, 1},
			{"no trace meta", `SELECT count(*) FROM alicia_meta WHERE key IN ('messaging.trace_id', 'messaging.span_id')`, nil, 0},
			{"meta model", `SELECT count(*) FROM alicia_meta WHERE key = 'model' AND value = 'qwen2.5-7b-instruct'`, nil, 1},
			{"conversation retrieval count", `SELECT retrieval_count FROM alicia_conversations WHERE id = $1`, []any{cid}, 1},
		} {
			t.Run(c.name, func(t *testing.T) {
				if got := s.queryInt(c.sql, c.args...); got != c.want {
					t.Fatalf("%s = %d, want %d", c.sql, got, c.want)
				}
			})
		}
	})
}
