package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Feedback sets the votes on msgs and on their tool uses, memory uses and
// reasoning steps (attached already), with user's own vote on each, and
// each message's note count: two queries in one round trip, whatever the
// number of messages. The target types are those POST
// /v1/messages/{id}/votes takes for them: message, tool_use, memory_usage
// (the use, not the memory), reasoning.
func (s *Store) Feedback(ctx context.Context, user string, msgs []Message) error {
	if len(msgs) == 0 {
		return nil
	}
	type target struct{ typ, id string }
	votes := map[target]*VoteCounts{}
	var types, ids, mids []string
	add := func(typ, id string, v *VoteCounts) {
		votes[target{typ, id}] = v
		types, ids = append(types, typ), append(ids, id)
	}
	notes := make(map[string]*int, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		add("message", m.ID, &m.Votes)
		for j := range m.ToolUses {
			add("tool_use", m.ToolUses[j].ID, &m.ToolUses[j].Votes)
		}
		for j := range m.MemoriesUsed {
			add("memory_usage", m.MemoriesUsed[j].ID, &m.MemoriesUsed[j].Votes)
		}
		for j := range m.Reasoning {
			add("reasoning", m.Reasoning[j].ID, &m.Reasoning[j].Votes)
		}
		mids = append(mids, m.ID)
		notes[m.ID] = &m.NoteCount
	}
	batch := &pgx.Batch{}
	batch.Queue(`SELECT v.target_type::text, v.target_id,
			count(*) FILTER (WHERE v.vote = 'up'), count(*) FILTER (WHERE v.vote = 'down'),
			count(*) FILTER (WHERE v.vote = 'critical'), max(v.vote::text) FILTER (WHERE v.user_id = $3)
		FROM unnest($1::text[], $2::text[]) AS t(target_type, target_id)
		JOIN alicia_votes v ON v.target_type = t.target_type::feedback_target_type AND v.target_id = t.target_id
		WHERE v.deleted_at IS NULL
		GROUP BY v.target_type, v.target_id`, types, ids, user).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var t target
			var c VoteCounts
			if err := rows.Scan(&t.typ, &t.id, &c.Upvotes, &c.Downvotes, &c.SpecialVotes, &c.UserVote); err != nil {
				return err
			}
			if v := votes[t]; v != nil {
				*v = c
			}
		}
		return rows.Err()
	})
	batch.Queue(`SELECT message_id, count(*) FROM alicia_notes WHERE message_id = ANY($1) AND deleted_at IS NULL
		GROUP BY message_id`, mids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var mid string
			var n int
			if err := rows.Scan(&mid, &n); err != nil {
				return err
			}
			if p := notes[mid]; p != nil {
				*p = n
			}
		}
		return rows.Err()
	})
	if err := s.pool.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("store: message feedback: %w", err)
	}
	return nil
}
