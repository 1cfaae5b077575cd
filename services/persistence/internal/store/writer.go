package store

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/alicia-voice/alicia/pkg/bus"
	"github.com/alicia-voice/alicia/pkg/subjects"
	"github.com/alicia-voice/alicia/services/persistence/internal/consume"
)

// writer queues the statements of a batch in stream order. Rows that many
// envelopes touch (meta, conversation stanza ids, assembled contents) are
// accumulated and written once at the end of the batch.
type writer struct {
	b *pgx.Batch
	// stream and seq are the stream and sequence of the envelope being
	// written (rows that record the last change they saw, see system.go).
	stream    string
	seq       uint64
	convs     map[string]*convState
	convOrder []string
	sentences sentenceRows
	tools     toolRows
	meta      map[metaKey]metaRow
	metaKeys  []metaKey
}

// convState is what a batch changes on a conversation row, written once at
// the end: every update of that row is a new row version with an entry in
// each of its indexes (updated_at is indexed), so one update per batch
// instead of one per envelope is most of the apply cost.
type convState struct {
	userID                 string
	firstSeen              time.Time
	lastClient, lastServer int32
	hasClient, hasServer   bool
	// tip is the branch head after this batch: the last message inserted, or
	// the sibling a BranchUpdate selected, in stream order.
	tip   *string
	prefs map[string]any
}

type metaKey struct{ ref, key string }

// metaRow is a meta value and the id its row gets if it is new: ids follow
// the stream sequence, so new rows land at the right edge of the primary-key
// index instead of at random places (a redelivery maps to the same id).
type metaRow struct {
	id, value string
}

func newWriter(b *pgx.Batch, stream string) *writer {
	return &writer{b: b, stream: stream, convs: map[string]*convState{}, meta: map[metaKey]metaRow{}, sentences: newSentenceRows()}
}

// conversations queues, first in the batch, one statement that creates every
// conversation the batch touches and does not exist yet.
func (w *writer) conversations(items []consume.Item) {
	for i := range items {
		p, err := subjects.Parse(items[i].Delivery.Subject)
		if err != nil {
			continue
		}
		if _, ok := w.convs[p.ConversationID]; ok {
			continue
		}
		userID, _ := items[i].Env.Meta[MetaUserID].(string)
		w.convs[p.ConversationID] = &convState{userID: userID, firstSeen: itemTime(&items[i])}
		w.convOrder = append(w.convOrder, p.ConversationID)
	}
	if len(w.convOrder) == 0 {
		return
	}
	users := make([]string, len(w.convOrder))
	times := make([]time.Time, len(w.convOrder))
	for i, cid := range w.convOrder {
		users[i], times[i] = w.convs[cid].userID, w.convs[cid].firstSeen
	}
	w.q(`INSERT INTO alicia_conversations (id, user_id, status, livekit_room_name, created_at, updated_at)
		SELECT id, NULLIF(u, ''), 'active', 'conv_' || id, t, t FROM unnest($1::text[], $2::text[], $3::timestamptz[]) AS x(id, u, t)
		ON CONFLICT (id) DO NOTHING`, w.convOrder, users, times)
}

func itemTime(it *consume.Item) time.Time {
	if it.Delivery.Time.IsZero() {
		return time.Now().UTC()
	}
	return it.Delivery.Time.UTC()
}

func (w *writer) q(sql string, args ...any) { w.b.Queue(sql, args...) }

// envelope queues everything one envelope writes.
func (w *writer) envelope(it *consume.Item) error {
	env := &it.Env
	at := itemTime(it)
	w.seq = it.Delivery.Sequence
	cid := env.ConversationID
	if p, err := subjects.Parse(it.Delivery.Subject); err == nil {
		cid = p.ConversationID // the subject is authoritative
		w.stanza(cid, p.Origin, env.StanzaID, it.Delivery.Sequence)
	}
	ref, err := w.body(cid, env, at)
	if err != nil {
		return err
	}
	if ref == "" {
		ref = cid
	}
	if ref != "" && len(env.Meta) > 0 {
		keys := make([]string, 0, len(env.Meta))
		for k := range env.Meta {
			if !strings.HasPrefix(k, appliedSeqKey) {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		// Sequences are per stream: the SYSTEM stream's ids carry its name.
		format := "amt_%012d_%03d"
		if w.stream == bus.StreamSystem {
			format = "amt_sys_%012d_%03d"
		}
		for i, k := range keys {
			w.addMeta(ref, k, fmt.Sprintf(format, it.Delivery.Sequence, i), env.Meta[k])
		}
	}
	return nil
}

// MetaUserID is the envelope meta key the edges set to the authenticated user.
const MetaUserID = "alicia.user_id"

// appliedSeqKey prefixes the alicia_meta keys that record the stream
// sequence of the last change of a row (see system.go); envelope meta may
// not write them.
const appliedSeqKey = "alicia.applied_seq."

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

func (w *writer) addMeta(ref, key, id string, v any) {
	k := metaKey{ref, key}
	if old, ok := w.meta[k]; ok {
		id = old.id // the row this batch creates keeps its first id
	} else {
		w.metaKeys = append(w.metaKeys, k)
	}
	w.meta[k] = metaRow{id: id, value: metaValue(v)}
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
	w.flushSentences()
	w.flushTools()
	if len(w.metaKeys) > 0 {
		ids := make([]string, len(w.metaKeys))
		refs := make([]string, len(w.metaKeys))
		keys := make([]string, len(w.metaKeys))
		vals := make([]string, len(w.metaKeys))
		for i, k := range w.metaKeys {
			ids[i], refs[i], keys[i], vals[i] = w.meta[k].id, k.ref, k.key, w.meta[k].value
		}
		w.q(`INSERT INTO alicia_meta (id, ref, key, value)
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])
			ON CONFLICT (ref, key) DO UPDATE SET value = EXCLUDED.value, deleted_at = NULL
			WHERE alicia_meta.value IS DISTINCT FROM EXCLUDED.value OR alicia_meta.deleted_at IS NOT NULL`, ids, refs, keys, vals)
	}
	w.flushConversations()
}

// flushConversations writes branch heads, stanza ids and preferences of every
// conversation the batch touched with one statement.
func (w *writer) flushConversations() {
	n := len(w.convOrder)
	if n == 0 {
		return
	}
	tips := make([]*string, n)
	clients := make([]*int32, n)
	servers := make([]*int32, n)
	prefs := make([]*string, n)
	for i, cid := range w.convOrder {
		st := w.convs[cid]
		tips[i] = st.tip
		if st.hasClient {
			clients[i] = &st.lastClient
		}
		if st.hasServer {
			servers[i] = &st.lastServer
		}
		if len(st.prefs) > 0 {
			b, _ := json.Marshal(st.prefs)
			p := string(b)
			prefs[i] = &p
		}
	}
	w.q(`UPDATE alicia_conversations c SET
			tip_message_id = COALESCE(x.tip, c.tip_message_id),
			last_client_stanza_id = GREATEST(c.last_client_stanza_id, COALESCE(x.lc, 0)),
			last_server_stanza_id = LEAST(c.last_server_stanza_id, COALESCE(x.ls, 0)),
			preferences = c.preferences || COALESCE(x.p::jsonb, '{}')
		FROM unnest($1::text[], $2::text[], $3::int[], $4::int[], $5::text[]) AS x(id, tip, lc, ls, p)
		WHERE c.id = x.id AND (
			c.tip_message_id IS DISTINCT FROM COALESCE(x.tip, c.tip_message_id)
			OR c.last_client_stanza_id < COALESCE(x.lc, 0)
			OR c.last_server_stanza_id > COALESCE(x.ls, 0)
			OR NOT c.preferences @> COALESCE(x.p::jsonb, '{}'))`,
		w.convOrder, tips, clients, servers, prefs)
}
