package persistence_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/pkg/protocol"
)

// utterance is one spoken user message: its audio in two chunks (the first
// sent twice, as after a reconnect), its final transcription and the user
// message, which share the utterance id.
type utterance struct {
	cid, id string
}

const utteranceTrack = "TR_mic"

func (u utterance) chunk(s *stack, seq int32, data []byte) uint64 {
	return s.client(u.cid, 0, &protocol.AudioChunk{ConversationID: u.cid, TrackSid: ptr(utteranceTrack), Format: "pcm_s16le_16000",
		DurationMs: 500 * seq, Sequence: seq, Data: data}, map[string]any{"alicia.utterance_id": u.id})
}

func (u utterance) chunks(s *stack) uint64 {
	u.chunk(s, 1, []byte{0xaa, 0xbb})
	u.chunk(s, 1, []byte{0xaa, 0xbb})
	return u.chunk(s, 2, []byte{0xcc})
}

func (u utterance) transcription(s *stack) uint64 {
	return s.server(u.cid, &protocol.Transcription{ID: u.id, ConversationID: u.cid, Text: "Turn on the lights.", Final: true,
		Confidence: ptr(0.9), Language: ptr("en")}, nil)
}

func (u utterance) message(s *stack) uint64 {
	return s.client(u.cid, 1, &protocol.UserMessage{ID: u.id, ConversationID: u.cid, Content: "Turn on the lights."}, map[string]any{"alicia.user_id": "user-1"})
}

// TestUtteranceAudio: the audio chunks of an utterance (meta
// alicia.utterance_id) and its final transcription fill one input audio row
// linked to the user message, in any order, live or in one batch; a chunk
// sent twice is appended once. A chunk without the meta keeps a row of its own.
func TestUtteranceAudio(t *testing.T) {
	s := newStack(t)
	orders := map[string]func(u utterance, s *stack) uint64{
		"audio, transcription, message": func(u utterance, s *stack) uint64 { u.chunks(s); u.transcription(s); return u.message(s) },
		"transcription, audio, message": func(u utterance, s *stack) uint64 { u.transcription(s); u.chunks(s); return u.message(s) },
		"transcription, message, audio": func(u utterance, s *stack) uint64 { u.transcription(s); u.message(s); return u.chunks(s) },
		"message, audio, transcription": func(u utterance, s *stack) uint64 { u.message(s); u.chunks(s); return u.transcription(s) },
	}
	type tcase struct {
		name    string
		publish func(u utterance, s *stack) uint64
		u       utterance
		last    uint64
	}
	var cases []*tcase
	i := 0
	for _, batch := range []bool{false, true} {
		for name, publish := range orders {
			mode := "live"
			if batch {
				mode = "one batch"
			}
			cid := fmt.Sprintf("ac_utt%d", i)
			cases = append(cases, &tcase{name: name + " " + mode, publish: publish, u: utterance{cid: cid, id: "am_utt_" + cid}})
			i++
		}
	}
	s.start()
	for _, c := range cases[:len(orders)] {
		c.last = c.publish(c.u, s)
	}
	s.history(cases[0].u.cid, cases[len(orders)-1].last)
	s.stop()
	for _, c := range cases[len(orders):] {
		c.last = c.publish(c.u, s)
	}
	s.start()

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := c.u
			s.history(u.cid, c.last)
			var id, format, data, track, transcription, meta string
			var duration, chunkSeq int
			var linked bool
			err := s.pool.QueryRow(context.Background(), `SELECT a.id, a.audio_format, encode(a.audio_data, 'hex'), a.duration_ms,
					a.livekit_track_sid, a.transcription, a.transcription_meta->>'language', a.chunk_sequence, m.audio_id = a.id
				FROM alicia_audio a JOIN alicia_messages m ON m.id = a.message_id WHERE a.conversation_id = $1`, u.cid).
				Scan(&id, &format, &data, &duration, &track, &transcription, &meta, &chunkSeq, &linked)
			if err != nil {
				t.Fatalf("audio row linked to the message: %v", err)
			}
			if format != "pcm_s16le_16000" || data != "aabbcc" || duration != 1500 || track != utteranceTrack ||
				transcription != "Turn on the lights." || meta != "en" || chunkSeq != 2 || !linked {
				t.Fatalf("audio row %s: format %s data %s duration %d track %s transcription %q language %s chunk %d linked %v",
					id, format, data, duration, track, transcription, meta, chunkSeq, linked)
			}
			if n := s.queryInt(`SELECT count(*) FROM alicia_audio WHERE conversation_id = $1`, u.cid); n != 1 {
				t.Fatalf("%d audio rows, want the utterance's one", n)
			}
			if n := s.queryInt(`SELECT count(*) FROM alicia_meta WHERE ref = $1 AND key = 'alicia.utterance_id' AND value = $2`, id, u.id); n != 1 {
				t.Fatal("the chunk's meta is not on its audio row")
			}
		})
	}

	t.Run("chunk without utterance", func(t *testing.T) {
		const cid = "ac_uttplain"
		s.client(cid, 0, &protocol.AudioChunk{ConversationID: cid, TrackSid: ptr(utteranceTrack), Format: "audio/opus", DurationMs: 20, Sequence: 1, Data: []byte{1}}, nil)
		last := s.client(cid, 0, &protocol.AudioChunk{ConversationID: cid, TrackSid: ptr(utteranceTrack), Format: "audio/opus", DurationMs: 20, Sequence: 2}, nil)
		s.history(cid, last)
		if n := s.queryInt(`SELECT count(*) FROM alicia_audio WHERE conversation_id = $1 AND message_id IS NULL AND transcription IS NULL
			AND chunk_sequence IS NULL AND audio_format = 'audio/opus'`, cid); n != 2 {
			t.Fatalf("%d rows, want one per chunk", n)
		}
	})
}

// TestUtteranceAudioLength: an utterance longer than one envelope holds
// arrives in several chunks and is stored whole.
func TestUtteranceAudioLength(t *testing.T) {
	s := newStack(t)
	s.start()
	u := utterance{cid: "ac_uttlong", id: "am_uttlong"}
	part := []byte(strings.Repeat("\x01\x02", 300_000)) // 600 kB: 18.75 s at 16 kHz
	u.chunk(s, 1, part)
	u.chunk(s, 2, part)
	last := u.chunk(s, 3, part)
	s.history(u.cid, last)
	if n := s.queryInt(`SELECT octet_length(audio_data) FROM alicia_audio WHERE conversation_id = $1`, u.cid); n != 3*len(part) {
		t.Fatalf("%d bytes stored, want %d", n, 3*len(part))
	}
}
