package store

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/protocol"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/services/persistence/internal/consume"
)

// writer queues the statements of a batch in stream order. Rows that many
// envelopes touch (meta, conversation stanza ids, assembled contents) are
// accumulated and written once at the end of the batch.
type writer struct {
	b        *pgx.Batch
	convs    map[string]*convState
	contents map[string]bool // assistant messages whose contents are reassembled
	meta     map[metaKey]string
	metaKeys []metaKey
}

type convState struct {
	lastClient, lastServer int32
	hasClient, hasServer   bool
}

type metaKey struct{ ref, key string }

func newWriter(b *pgx.Batch) *writer {
	return &writer{b: b, convs: map[string]*convState{}, contents: map[string]bool{}, meta: map[metaKey]string{}}
}

func (w *writer) q(sql string, args ...any) { w.b.Queue(sql, args...) }

// envelope queues everything one envelope writes.
func (w *writer) envelope(it *consume.Item) error {
	env := &it.Env
	at := it.Delivery.Time
	if at.IsZero() {
		at = time.Now()
	}
	at = at.UTC()
	cid := env.ConversationID
	if p, err := subjects.Parse(it.Delivery.Subject); err == nil {
		cid = p.ConversationID // the subject is authoritative
		w.conversation(cid, env, at)
		w.stanza(cid, p.Origin, env.StanzaID, it.Delivery.Sequence)
	}
	ref, err := w.body(cid, env, at)
	if err != nil {
		return err
	}
	if ref == "" {
		ref = cid
	}
	for k, v := range env.Meta {
		w.addMeta(ref, k, v)
	}
	return nil
}

// conversation makes sure the conversation row exists before anything in it.
func (w *writer) conversation(cid string, env *protocol.Envelope, at time.Time) {
	if _, ok := w.convs[cid]; ok {
		return
	}
	w.convs[cid] = &convState{}
	userID, _ := env.Meta[MetaUserID].(string)
	w.q(`INSERT INTO alicia_conversations (id, user_id, status, livekit_room_name, created_at, updated_at)
		VALUES ($1, NULLIF($2, ''), 'active', 'conv_' || $1, $3, $3) ON CONFLICT (id) DO NOTHING`, cid, userID, at)
}

// MetaUserID is the envelope meta key the edges set to the authenticated user.
const MetaUserID = "alicia.user_id"

func (w *writer) stanza(cid string, o subjects.Origin, stanzaID int32, seq uint64) {
	st := w.convs[cid]
	switch o {
	case subjects.OriginClient:
		if stanzaID > 0 && (!st.hasClient || stanzaID > st.lastClient) {
			st.lastClient, st.hasClient = stanzaID, true
		}
	case subjects.OriginServer:
		if sid, err := bus.ServerStanzaID(seq); err == nil && (!st.hasServer || sid < st.lastServer) {
			st.lastServer, st.hasServer = sid, true
		}
	}
}

func (w *writer) addMeta(ref, key string, v any) {
	k := metaKey{ref, key}
	if _, ok := w.meta[k]; !ok {
		w.metaKeys = append(w.metaKeys, k)
	}
	w.meta[k] = metaValue(v)
}

func metaValue(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	case []byte:
		return string(x)
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Sprint(x)
		}
		return string(b)
	}
}

// flush writes the accumulated rows.
func (w *writer) flush() {
	for id := range w.contents {
		w.q(`UPDATE alicia_messages m SET contents = s.contents
			FROM (SELECT string_agg(text, ' ' ORDER BY sentence_sequence_number) AS contents
			      FROM alicia_sentences WHERE message_id = $1 AND deleted_at IS NULL) s
			WHERE m.id = $1 AND s.contents IS NOT NULL AND m.contents IS DISTINCT FROM s.contents`, id)
	}
	if len(w.metaKeys) > 0 {
		refs := make([]string, len(w.metaKeys))
		keys := make([]string, len(w.metaKeys))
		vals := make([]string, len(w.metaKeys))
		for i, k := range w.metaKeys {
			refs[i], keys[i], vals[i] = k.ref, k.key, w.meta[k]
		}
		w.q(`INSERT INTO alicia_meta (ref, key, value)
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
			ON CONFLICT (ref, key) DO UPDATE SET value = EXCLUDED.value
			WHERE alicia_meta.value IS DISTINCT FROM EXCLUDED.value`, refs, keys, vals)
	}
	for cid, st := range w.convs {
		if st.hasClient {
			w.q(`UPDATE alicia_conversations SET last_client_stanza_id = $2
				WHERE id = $1 AND (last_client_stanza_id IS NULL OR last_client_stanza_id < $2)`, cid, st.lastClient)
		}
		if st.hasServer {
			w.q(`UPDATE alicia_conversations SET last_server_stanza_id = $2
				WHERE id = $1 AND (last_server_stanza_id IS NULL OR last_server_stanza_id > $2)`, cid, st.lastServer)
		}
	}
}
