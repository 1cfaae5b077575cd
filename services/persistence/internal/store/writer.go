package store

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
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
	b *pgx.Batch
	// stream and seq are the stream and the ordering sequence (epoch<<44 |
	// stream sequence) of the envelope being written: rows that record the
	// last change they saw (see system.go) compare it, so a new stream's
	// changes win over an old stream's.
	stream    string
	epoch     uint64
	seq       uint64
	convs     map[string]*convState
	convOrder []string
	messages  messageRows
	sentences sentenceRows
	tools     toolRows
	meta      map[metaKey]metaRow
	metaKeys  []metaKey
	// trace is the trace id of the envelope being written (nil: none), a
	// column of the rows it makes (see trace.go).
	trace *string
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
	// tipSeq and prefsSeq are the sequences of the envelopes that set tip
	// and prefs: a replayed batch does not move the head back to where an
	// older envelope put it (see flushConversations).
	tipSeq, prefsSeq uint64
}

type metaKey struct{ ref, key string }

// metaRow is a meta value and the id its row gets if it is new: ids follow
// the stream sequence, so new rows land at the right edge of the primary-key
// index instead of at random places (a redelivery maps to the same id).
type metaRow struct {
	id, value string
}

func newWriter(b *pgx.Batch, stream string, epoch int) *writer {
	return &writer{b: b, stream: stream, epoch: uint64(epoch) << EpochShift, convs: map[string]*convState{}, meta: map[metaKey]metaRow{}, sentences: newSentenceRows()}
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

// q queues a statement after the accumulated messages: every statement
// sees the messages of the envelopes before it.
func (w *writer) q(sql string, args ...any) {
	w.flushMessages()
	w.b.Queue(sql, args...)
}

// envelope queues everything one envelope writes.
func (w *writer) envelope(it *consume.Item) error {
	env := &it.Env
	at := itemTime(it)
	w.seq = w.epoch | it.Delivery.Sequence
	w.trace = traceID(env.Meta)
	cid := env.ConversationID
	p, perr := subjects.Parse(it.Delivery.Subject)
	if err := placed(env.Type, p.Origin, perr == nil); err != nil {
		return err
	}
	if env.Type == protocol.TypeTurnEvent {
		// Kept in the stream for replay and the debug timeline; it leaves
		// no trace in the conversation's rows (not even meta).
		return nil
	}
	if perr == nil {
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
			if !strings.HasPrefix(k, appliedSeqKey) && !traceKey(k) {
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
			w.addMeta(ref, k, fmt.Sprintf(format, w.seq, i), env.Meta[k])
		}
	}
	return nil
}

// MetaUserID is the envelope meta key the edges set to the authenticated user.
const MetaUserID = "alicia.user_id"

// CommentaryConversation is the commentaryType of a Commentary on a whole
// conversation (PROTOCOL.md 15): its messageId only anchors it.
const CommentaryConversation = "conversation"

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
	case subjects.OriginAgent:
		// Internal envelopes between services: no client sent them and no
		// client receives them, so they are neither kind of stanza.
	}
}

// placed checks that an envelope of type t may be stored where it was
// published (origin o of a conversation subject when onConversation, else a
// system subject). Work items (64, 65, 68) travel on their own work queues
// and core NATS, never as records; SentenceAudio, SentencePlayout, TurnEvent
// and TurnJudgement only on a conversation's agent subjects; the prompt
// optimiser's records only on system subjects. Anything else is dead-lettered.
func placed(t protocol.MessageType, o subjects.Origin, onConversation bool) error {
	switch t {
	case protocol.TypeASRJob, protocol.TypeSpeechAudio, protocol.TypeAgentDispatch:
		return fmt.Errorf("%w: %s", errWorkItem, t)
	case protocol.TypeSentenceAudio, protocol.TypeSentencePlayout, protocol.TypeTurnEvent, protocol.TypeTurnJudgement:
		if !onConversation || o != subjects.OriginAgent {
			return fmt.Errorf("%w: %s", errNotAgentSubject, t)
		}
	case protocol.TypeOptimizationRun, protocol.TypeEliteOptions, protocol.TypeDimensionPreference, protocol.TypeEliteSelect,
		protocol.TypeLearningConsent, protocol.TypeUserSettings, protocol.TypeTimer:
		if onConversation {
			return fmt.Errorf("%w: %s", errSystemOnly, t)
		}
	}
	return nil
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
	w.flushMessages()
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
// conversation the batch touched with one statement. Stanza ids only grow;
// the head and the preferences are set by envelopes that may be replayed
// after newer ones were applied, so the row records the sequence of the last
// head or preferences change (alicia.applied_seq.<stream>.head, see
// system.go) and an older envelope's head or preferences are left out.
func (w *writer) flushConversations() {
	n := len(w.convOrder)
	if n == 0 {
		return
	}
	tips := make([]*string, n)
	clients := make([]*int32, n)
	servers := make([]*int32, n)
	prefs := make([]*string, n)
	tipSeqs := make([]int64, n)
	prefsSeqs := make([]int64, n)
	for i, cid := range w.convOrder {
		st := w.convs[cid]
		tips[i], tipSeqs[i], prefsSeqs[i] = st.tip, int64(st.tipSeq), int64(st.prefsSeq)
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
	w.q(`WITH x AS (
			SELECT x.*, COALESCE((SELECT v.value::bigint FROM alicia_meta v
				WHERE v.ref = x.id AND v.key = 'alicia.applied_seq.' || $8::text || '.head'), 0) AS ver
			FROM unnest($1::text[], $2::text[], $3::int[], $4::int[], $5::text[], $6::bigint[], $7::bigint[]) AS x(id, tip, lc, ls, p, ts, ps)
		), y AS (
			SELECT id, CASE WHEN ts > ver THEN tip END AS tip, lc, ls, CASE WHEN ps > ver THEN p::jsonb END AS p FROM x
		), ch AS (
			UPDATE alicia_conversations c SET
				tip_message_id = COALESCE(y.tip, c.tip_message_id),
				last_client_stanza_id = GREATEST(c.last_client_stanza_id, COALESCE(y.lc, 0)),
				last_server_stanza_id = LEAST(c.last_server_stanza_id, COALESCE(y.ls, 0)),
				preferences = c.preferences || COALESCE(y.p, '{}')
			FROM y JOIN alicia_conversations old ON old.id = y.id
			WHERE c.id = y.id AND (
				c.tip_message_id IS DISTINCT FROM COALESCE(y.tip, c.tip_message_id)
				OR c.last_client_stanza_id < COALESCE(y.lc, 0)
				OR c.last_server_stanza_id > COALESCE(y.ls, 0)
				OR NOT c.preferences @> COALESCE(y.p, '{}'))
			RETURNING c.id, old.tip_message_id IS DISTINCT FROM c.tip_message_id OR old.preferences IS DISTINCT FROM c.preferences AS head
		)
		INSERT INTO alicia_meta (id, ref, key, value)
		SELECT 'amt_seq_' || $8::text || '.head_' || ch.id, ch.id, 'alicia.applied_seq.' || $8::text || '.head', GREATEST(x.ts, x.ps)::text
		FROM ch JOIN x ON x.id = ch.id WHERE ch.head
		ON CONFLICT (ref, key) DO UPDATE SET value = GREATEST(alicia_meta.value::bigint, EXCLUDED.value::bigint)::text, deleted_at = NULL`,
		w.convOrder, tips, clients, servers, prefs, tipSeqs, prefsSeqs, w.stream)
}
