package persistence_test

import (
	"context"
	"math"
	"testing"

	"github.com/pgvector/pgvector-go"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
)

const memCID = "ac_mem"

// embeddingOf is a deterministic 1024-number embedding standing for the
// embedding of one text.
func embeddingOf(seed float64) []float64 {
	v := make([]float64, 1024)
	for i := range v {
		v[i] = math.Sin(seed + float64(i)*0.01)
	}
	return v
}

func vectorOf(v []float64) pgvector.Vector {
	f := make([]float32, len(v))
	for i, x := range v {
		f[i] = float32(x)
	}
	return pgvector.NewVector(f)
}

// memStack is a stack with a conversation whose user message memories can cite.
type memStack struct {
	*stack
	userMessage string
}

func newMemStack(t *testing.T) *memStack {
	s := newStack(t)
	s.start()
	m := &memStack{stack: s, userMessage: "am_u_mem"}
	s.history(memCID, s.client(memCID, 1, &protocol.UserMessage{ID: m.userMessage, ConversationID: memCID, Content: "I like green tea."}, userMeta))
	return m
}

var userMeta = map[string]any{"alicia.user_id": "user-1"}

// fromClient publishes a MemoryAction as a client does (conversation subject, no embedding) and waits until it is applied.
func (m *memStack) fromClient(action protocol.MemoryActionAction, id, content string, tags ...string) {
	m.t.Helper()
	stanza := int32(m.queryInt(`SELECT last_client_stanza_id FROM alicia_conversations WHERE id = $1`, memCID)) + 1
	seq := m.client(memCID, stanza, &protocol.MemoryAction{ID: "ama_c_" + id, Action: action, Timestamp: 1700000000000,
		Memory: &protocol.MemoryActionMemory{ID: &id, Content: content, Tags: tags}}, userMeta)
	m.history(memCID, seq)
}

// fromService publishes a MemoryAction as the memory service does
// (alicia.sys.memory_action, with the embedding and provenance) and waits until it is applied.
func (m *memStack) fromService(action protocol.MemoryActionAction, id, content string, emb []float64, tags ...string) {
	m.t.Helper()
	seq := m.system(&protocol.MemoryAction{ID: "ama_s_" + id, Action: action, Timestamp: 1700000000000,
		Memory: &protocol.MemoryActionMemory{ID: &id, Content: content, Tags: tags, Embedding: emb, EmbeddingModel: ptr("bge-m3"),
			Source: ptr("extraction"), SourceMessageID: ptr(m.userMessage), Confidence: ptr(0.75), Importance: ptr(0.8)}}, userMeta)
	m.applied(bus.StreamSystem, seq)
}

// row is a memory row without its id, timestamps and embedding (see check), as JSON.
func (m *memStack) row(id string) string {
	m.t.Helper()
	var r string
	err := m.pool.QueryRow(context.Background(), `SELECT (to_jsonb(m) - 'id' - 'created_at' - 'updated_at' - 'embeddings')::text FROM alicia_memory m WHERE id = $1`, id).Scan(&r)
	if err != nil {
		m.t.Fatalf("memory %s: %v", id, err)
	}
	return r
}

// check fails the test unless the memory holds content and the embedding
// emb of it (nil: none).
func (m *memStack) check(id, content string, emb []float64) {
	m.t.Helper()
	var gotContent string
	var same, isNull bool
	var info string
	err := m.pool.QueryRow(context.Background(), `SELECT content, embeddings IS NULL, embeddings_info::text FROM alicia_memory WHERE id = $1`, id).
		Scan(&gotContent, &isNull, &info)
	if err != nil {
		m.t.Fatalf("memory %s: %v", id, err)
	}
	if emb != nil {
		err = m.pool.QueryRow(context.Background(), `SELECT COALESCE(embeddings = $2, false) FROM alicia_memory WHERE id = $1`, id, vectorOf(emb)).Scan(&same)
		if err != nil {
			m.t.Fatal(err)
		}
	}
	switch {
	case gotContent != content:
		m.t.Errorf("%s content = %q, want %q", id, gotContent, content)
	case emb == nil && (!isNull || info != "{}"):
		m.t.Errorf("%s has an embedding (%s), want none", id, info)
	case emb != nil && (!same || info != `{"dims": 1024, "model": "bge-m3"}`):
		m.t.Errorf("%s embedding is not the one of %q (info %s)", id, content, info)
	}
}

// TestMemoryFromBothStreams: the client's MemoryAction and the memory
// service's (same id and content, with the embedding) end in the same row in
// either arrival order.
func TestMemoryFromBothStreams(t *testing.T) {
	m := newMemStack(t)
	tea := embeddingOf(1)
	m.fromClient(protocol.MemoryActionActionCreate, "amem_client_first", "Likes green tea", "drinks")
	m.fromService(protocol.MemoryActionActionCreate, "amem_client_first", "Likes green tea", tea, "drinks")
	m.fromService(protocol.MemoryActionActionCreate, "amem_service_first", "Likes green tea", tea, "drinks")
	m.fromClient(protocol.MemoryActionActionCreate, "amem_service_first", "Likes green tea", "drinks")

	a, b := m.row("amem_client_first"), m.row("amem_service_first")
	if a != b {
		t.Fatalf("the arrival order changed the row:\nclient first  %s\nservice first %s", a, b)
	}
	for _, id := range []string{"amem_client_first", "amem_service_first"} {
		m.check(id, "Likes green tea", tea)
	}
	var source, user, createdBy, sourceMessage, tags string
	var confidence, importance float64
	err := m.pool.QueryRow(context.Background(), `SELECT source_type, user_id, created_by, source_message_id, confidence, importance, array_to_string(tags, ',')
		FROM alicia_memory WHERE id = 'amem_client_first'`).Scan(&source, &user, &createdBy, &sourceMessage, &confidence, &importance, &tags)
	if err != nil {
		t.Fatal(err)
	}
	if source != "extraction" || user != "user-1" || createdBy != "extraction" || sourceMessage != m.userMessage || confidence != 0.75 || importance != 0.8 || tags != "drinks" {
		t.Fatalf("row = source %s user %s created_by %s message %s confidence %v importance %v tags %s", source, user, createdBy, sourceMessage, confidence, importance, tags)
	}

	t.Run("client only: defaults", func(t *testing.T) {
		m.fromClient(protocol.MemoryActionActionCreate, "amem_plain", "Has a cat")
		m.check("amem_plain", "Has a cat", nil)
		if n := m.queryInt(`SELECT count(*) FROM alicia_memory WHERE id = 'amem_plain' AND source_type = 'user' AND confidence = 1
			AND source_message_id IS NULL AND importance = 0.5 AND tags = '{}'`); n != 1 {
			t.Fatalf("defaults not applied: %s", m.row("amem_plain"))
		}
	})
	t.Run("unknown source message is NULL", func(t *testing.T) {
		id := "amem_nomsg"
		seq := m.system(&protocol.MemoryAction{ID: "ama_nomsg", Action: protocol.MemoryActionActionCreate, Timestamp: 1,
			Memory: &protocol.MemoryActionMemory{ID: &id, Content: "x", SourceMessageID: ptr("am_missing")}}, userMeta)
		m.applied(bus.StreamSystem, seq)
		if n := m.queryInt(`SELECT count(*) FROM alicia_memory WHERE id = $1 AND source_message_id IS NULL`, id); n != 1 {
			t.Fatalf("row = %s", m.row(id))
		}
	})
	t.Run("a create with other content does not overwrite", func(t *testing.T) {
		m.fromService(protocol.MemoryActionActionCreate, "amem_plain", "Has a dog", embeddingOf(9))
		m.check("amem_plain", "Has a cat", nil)
	})
}

// TestMemoryUpdates: an update keeps the embedding only while the content
// stays the same, and the two streams' updates converge in either order.
func TestMemoryUpdates(t *testing.T) {
	m := newMemStack(t)
	c, d := embeddingOf(1), embeddingOf(2)
	create := func(id string) {
		m.fromService(protocol.MemoryActionActionCreate, id, "C", c)
	}
	type step func(id string)
	client := func(action protocol.MemoryActionAction, content string, tags ...string) step {
		return func(id string) { m.fromClient(action, id, content, tags...) }
	}
	service := func(action protocol.MemoryActionAction, content string, emb []float64) step {
		return func(id string) { m.fromService(action, id, content, emb) }
	}
	cases := []struct {
		name        string
		steps       []step
		content     string
		emb         []float64
		wantTagsCSV string
	}{
		{"same content keeps the embedding", []step{client(protocol.MemoryActionActionUpdate, "C", "new")}, "C", c, "new"},
		{"new content without an embedding drops it", []step{client(protocol.MemoryActionActionUpdate, "D")}, "D", nil, ""},
		{"new content with its embedding", []step{service(protocol.MemoryActionActionUpdate, "D", d)}, "D", d, ""},
		{"client update, then the service's", []step{client(protocol.MemoryActionActionUpdate, "D"), service(protocol.MemoryActionActionUpdate, "D", d)}, "D", d, ""},
		{"service update, then the client's", []step{service(protocol.MemoryActionActionUpdate, "D", d), client(protocol.MemoryActionActionUpdate, "D")}, "D", d, ""},
		{"a late create does not bring back the old embedding", []step{
			client(protocol.MemoryActionActionUpdate, "D"), service(protocol.MemoryActionActionCreate, "C", c), service(protocol.MemoryActionActionUpdate, "D", d)}, "D", d, ""},
	}
	for i, cs := range cases {
		t.Run(cs.name, func(t *testing.T) {
			id := "amem_upd" + string(rune('a'+i))
			create(id)
			for _, st := range cs.steps {
				st(id)
			}
			m.check(id, cs.content, cs.emb)
			if n := m.queryInt(`SELECT count(*) FROM alicia_memory WHERE id = $1 AND array_to_string(tags, ',') = $2`, id, cs.wantTagsCSV); n != 1 {
				t.Errorf("tags: %s", m.row(id))
			}
		})
	}
	t.Run("both update orders give the same row", func(t *testing.T) {
		if a, b := m.row("amem_upd"+string(rune('a'+3))), m.row("amem_upd"+string(rune('a'+4))); a != b {
			t.Fatalf("rows differ:\n%s\n%s", a, b)
		}
	})
	t.Run("another user's update changes nothing", func(t *testing.T) {
		id := "amem_owned"
		create(id)
		before := m.row(id)
		// Dead-lettered, so its stanza id is not recorded: one far ahead
		// keeps the next client envelope's id from being a duplicate.
		seq := m.client(memCID, int32(m.queryInt(`SELECT last_client_stanza_id FROM alicia_conversations WHERE id = $1`, memCID))+1000,
			&protocol.MemoryAction{ID: "ama_x", Action: protocol.MemoryActionActionUpdate, Timestamp: 1,
				Memory: &protocol.MemoryActionMemory{ID: &id, Content: "hijacked"}}, map[string]any{"alicia.user_id": "user-2"})
		m.history(memCID, seq)
		if after := m.row(id); after != before {
			t.Fatalf("row changed:\n%s\n%s", before, after)
		}
	})
	t.Run("pin, archive, delete", func(t *testing.T) {
		id := "amem_life"
		create(id)
		for _, a := range []protocol.MemoryActionAction{protocol.MemoryActionActionPin, protocol.MemoryActionActionArchive, protocol.MemoryActionActionDelete} {
			m.fromClient(a, id, "C")
		}
		if n := m.queryInt(`SELECT count(*) FROM alicia_memory WHERE id = $1 AND pinned AND archived AND deleted_at IS NOT NULL`, id); n != 1 {
			t.Fatalf("row = %s", m.row(id))
		}
	})
}
